package app

import (
	"bytes"
	"context"
	"flag"
	"io"
	"log"
	"os"
	"path/filepath"
	"sync"

	"github.com/spf13/cobra"
	"gopkg.in/natefinch/lumberjack.v2"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// logToStderrFlag keeps every log line on the terminal, as before
// kubeboot wrote them to the data dir.
const logToStderrFlag = "log-to-stderr"

// aboveFatal is a klog severity above its highest, FATAL (3).
const aboveFatal = "4"

// Rotation of the server's log file: 100 MB a file, five old ones kept
// for 30 days at most (kube-apiserver's audit log uses the same library).
const (
	logMaxSizeMB  = 100
	logMaxBackups = 5
	logMaxAgeDays = 30
)

// addLogFlags adds klog's verbosity flags and --log-to-stderr.
func addLogFlags(cmd *cobra.Command) {
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	cmd.Flags().AddGoFlag(klogFlags.Lookup("v"))
	cmd.Flags().AddGoFlag(klogFlags.Lookup("vmodule"))
	cmd.Flags().Bool(logToStderrFlag, false, "Write every log line to standard error. By default the server logs to logs/kubeboot.log in --data-dir (rotated) and the terminal shows errors only; -v above 0, or standard error being systemd's journal, implies this.")
}

// logFile is the server's log, <data-dir>/logs/kubeboot.log, rotated.
// Until open it holds the lines in memory, so that a start refused
// before it has built anything (a refused join) leaves no data dir.
// klog's error and fatal lines go to the terminal too, until stopping.
type logFile struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	out      io.Writer
	terminal io.Writer
	// stopping is the command's context: once done, the server stops.
	stopping context.Context
}

func (f *logFile) Write(p []byte) (int, error) {
	// klog writes one entry at a time, its header first: "E1126 13:11:17...".
	if len(p) > 0 && (p[0] == 'E' || p[0] == 'F') {
		f.toTerminal(p)
	}
	return f.record(p)
}

// record writes p to the file only.
func (f *logFile) record(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.out != nil {
		return f.out.Write(p)
	}
	return f.buf.Write(p)
}

// toTerminal writes an error line to the terminal, unless the server is
// stopping: then the components' errors are those of the work the stop
// cut short (informers that had not synced, requests in flight), a
// screenful with many nodes; the file keeps them, and a stop that fails
// says so in the command's error.
func (f *logFile) toTerminal(p []byte) {
	if f.stopping.Err() == nil {
		_, _ = f.terminal.Write(p)
	}
}

// open writes what was held to the file in dataDir, and from then on
// every line.
func (f *logFile) open(dataDir string) (path string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	path = filepath.Join(dataDir, "logs", "kubeboot.log")
	out := &lumberjack.Logger{Filename: path, MaxSize: logMaxSizeMB, MaxBackups: logMaxBackups, MaxAge: logMaxAgeDays}
	if _, err := out.Write(f.buf.Bytes()); err != nil {
		return "", err
	}
	f.buf = bytes.Buffer{}
	f.out = out
	return path, nil
}

// stdLog is where lines logged through Go's standard log package go
// (CoreDNS logs through it, each line prefixed [INFO], [WARNING] or
// [ERROR]): with klog's lines, errors on the terminal too. Not through
// klog itself: CoreDNS's kubernetes plugin points klog at CoreDNS's log
// while it starts, which would loop.
type stdLog struct {
	file *logFile
}

func (l stdLog) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("[ERROR] ")) || bytes.Contains(p, []byte("[FATAL] ")) {
		l.file.toTerminal(p)
	}
	return l.file.Write(p)
}

// routeLogs sends klog's lines to a logFile, errors also to terminal,
// unless the command's flags keep them all on standard error
// (--log-to-stderr, -v above 0) or standard error is systemd's journal
// (JOURNAL_STREAM, as under install.sh's unit), which stores and rotates
// them; it returns nil then. Once the command's context is done (the
// server stops) errors go to the file only.
func routeLogs(cmd *cobra.Command, terminal io.Writer) *logFile {
	toStderr, _ := cmd.Flags().GetBool(logToStderrFlag)
	if v := cmd.Flags().Lookup("v"); toStderr || (v != nil && v.Value.String() != "0") || os.Getenv("JOURNAL_STREAM") != "" {
		return nil
	}
	f := &logFile{terminal: terminal, stopping: cmd.Context()}
	settings := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(settings)
	// Each line once, at its own severity. klog itself writes none to
	// standard error (a threshold above FATAL): the logFile hands errors
	// to terminal, which may be drawing a progress line there.
	for name, value := range map[string]string{"logtostderr": "false", "one_output": "true", "stderrthreshold": aboveFatal} {
		_ = settings.Set(name, value)
	}
	klog.SetOutput(f)
	log.SetOutput(stdLog{file: f})
	utilruntime.ErrorHandlers[0] = unhandledErrorsToFile(f)
	return f
}

// fileOnly is the log file without the terminal.
type fileOnly struct{ file *logFile }

func (w fileOnly) Write(p []byte) (int, error) { return w.file.record(p) }

// unhandledErrorsToFile is apimachinery's first error handler, which
// logs what is handed to utilruntime.HandleError, writing the same line
// to the log file only. Upstream hands it the errors its caller retries
// or cannot return: a controller's sync that failed and is queued again
// (1.37's ReplicaSet controller reads its own writes back and retries
// until the cache has them), a watch restarted. A user can do nothing
// about them, and what needs a user is in the objects' events and
// conditions; the errors a component logs itself still reach the
// terminal. The line lacks the names a caller's contextual logger would
// add: klog cannot write them anywhere but its one output.
func unhandledErrorsToFile(f *logFile) utilruntime.ErrorHandler {
	// As upstream's: its caller is <caller> -> HandleError* -> handleError -> here.
	logger := klog.LoggerWithName(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(fileOnly{f}))).WithCallDepth(3), "UnhandledError")
	return func(_ context.Context, err error, msg string, keysAndValues ...any) {
		logger.Error(err, msg, keysAndValues...)
	}
}
