package app

import (
	"bytes"
	"flag"
	"io"
	"log"
	"os"
	"path/filepath"
	"sync"

	"github.com/spf13/cobra"
	"gopkg.in/natefinch/lumberjack.v2"
	"k8s.io/klog/v2"
)

// logToStderrFlag keeps every log line on the terminal, as before
// kubeboot wrote them to the data dir.
const logToStderrFlag = "log-to-stderr"

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
type logFile struct {
	mu  sync.Mutex
	buf bytes.Buffer
	out io.Writer
}

func (f *logFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.out != nil {
		return f.out.Write(p)
	}
	return f.buf.Write(p)
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
	file, terminal io.Writer
}

func (l stdLog) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("[ERROR] ")) || bytes.Contains(p, []byte("[FATAL] ")) {
		_, _ = l.terminal.Write(p)
	}
	return l.file.Write(p)
}

// routeLogs sends klog's lines to a logFile, errors also to the
// terminal, unless the command's flags keep them all on the terminal
// (--log-to-stderr, -v above 0) or standard error is systemd's journal
// (JOURNAL_STREAM, as under install.sh's unit), which stores and rotates
// them; it returns nil then.
func routeLogs(cmd *cobra.Command) *logFile {
	toStderr, _ := cmd.Flags().GetBool(logToStderrFlag)
	if v := cmd.Flags().Lookup("v"); toStderr || (v != nil && v.Value.String() != "0") || os.Getenv("JOURNAL_STREAM") != "" {
		return nil
	}
	f := &logFile{}
	settings := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(settings)
	// Each line once, at its own severity; errors and fatal ones on the
	// terminal too.
	for name, value := range map[string]string{"logtostderr": "false", "one_output": "true", "stderrthreshold": "ERROR"} {
		_ = settings.Set(name, value)
	}
	klog.SetOutput(f)
	log.SetOutput(stdLog{file: f, terminal: cmd.ErrOrStderr()})
	return f
}
