package integration

import (
	"testing"

	"github.com/kubeboot/kubeboot/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
