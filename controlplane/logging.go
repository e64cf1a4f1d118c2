package controlplane

import "go.uber.org/zap"

// quietEtcdClientLogger keeps the etcd client's retries out of the logs;
// failures surface as errors of the requests that hit them.
func quietEtcdClientLogger() *zap.Logger {
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
	lg, err := zc.Build()
	if err != nil {
		return zap.NewNop()
	}
	return lg
}
