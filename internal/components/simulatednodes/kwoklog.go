package simulatednodes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// kwokLog is the writer kwok's logger writes to: kwok logs through
// log/slog, each record one JSON object on a line (slog's JSONHandler:
// time, level, source, msg, then its attributes). Each record is logged
// again through logger, so that kwok's lines go where the server's do.
// Its errors are those of work it retries (a stage applied to a Pod that
// is already gone, a status update that conflicted), the simulated
// kubelet's as a controller's are its own: they go through
// utilruntime.HandleError as upstream's controllers' do, which the server
// keeps to its log file.
type kwokLog struct {
	logger klog.Logger
}

func (w kwokLog) Write(p []byte) (int, error) {
	for line := range bytes.Lines(p) {
		w.record(bytes.TrimSpace(line))
	}
	return len(p), nil
}

// record logs one JSON record; a line that is not one is logged as it is.
func (w kwokLog) record(line []byte) {
	if len(line) == 0 {
		return
	}
	var rec map[string]any
	if err := json.Unmarshal(line, &rec); err != nil {
		w.logger.Info(string(line))
		return
	}
	level, _ := rec["level"].(string)
	msg, _ := rec["msg"].(string)
	var errValue error
	if e, ok := rec["err"]; ok {
		errValue = errors.New(fmt.Sprint(e))
	}
	// The rest are the record's attributes, in a stable order.
	var keys []string
	for k := range rec {
		switch k {
		case "time", "level", "source", "msg", "err":
		default:
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	kv := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		kv = append(kv, k, rec[k])
	}
	if strings.HasPrefix(level, "ERROR") {
		utilruntime.HandleErrorWithLogger(w.logger, errValue, msg, kv...)
		return
	}
	if errValue != nil {
		kv = append(kv, "err", errValue)
	}
	w.logger.Info(msg, kv...)
}
