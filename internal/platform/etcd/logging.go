package etcd

import (
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// closingCore drops every entry once the member is being closed: etcd logs
// the listeners it shuts down as errors ("use of closed network
// connection"), which on a normal stop are noise.
type closingCore struct {
	zapcore.Core
	closing *atomic.Bool
}

func (c closingCore) With(fields []zapcore.Field) zapcore.Core {
	return closingCore{Core: c.Core.With(fields), closing: c.closing}
}

func (c closingCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.closing.Load() && e.Level < zapcore.PanicLevel {
		return ce
	}
	if benign[e.Message] {
		return ce
	}
	return c.Core.Check(e, ce)
}

// benign are errors etcd logs on a normal start: on a brand new member its
// storage version monitor runs before the first raft term is written,
// logs "missing term information" and simply tries again later.
var benign = map[string]bool{
	"failed to update storage version": true,
}

// newLogger returns etcd's logger at level, silenced once closing is set.
func newLogger(level string, closing *atomic.Bool) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.Sampling = nil
	return zc.Build(zap.WrapCore(func(core zapcore.Core) zapcore.Core {
		return closingCore{Core: core, closing: closing}
	}))
}
