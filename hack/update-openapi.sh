#!/usr/bin/env bash
# Regenerates internal/generated/openapi/zz_generated.openapi.go with the
# openapi-gen command of k8s.io/kube-openapi at exactly the version required
# in go.mod (the same generator kube-apiserver uses for pkg/generated/openapi).
#
# API rule violations found by the generator's linter are written to
# hack/openapi-violations.list instead of failing the run (kube-apiserver keeps
# the equivalent api/api-rules/violation_exceptions.list).
#
# Environment overrides (used by hack/verify-openapi.sh):
#   OPENAPI_OUTPUT_DIR   directory to write zz_generated.openapi.go into
#                        (default: internal/generated/openapi)
#   OPENAPI_REPORT_FILE  API rule violation report
#                        (default: hack/openapi-violations.list)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${REPO_ROOT}"

OUTPUT_PKG="github.com/kubeboot/kubeboot/internal/generated/openapi"
OUTPUT_DIR="${OPENAPI_OUTPUT_DIR:-${REPO_ROOT}/internal/generated/openapi}"
OUTPUT_FILE="zz_generated.openapi.go"
REPORT_FILE="${OPENAPI_REPORT_FILE:-${REPO_ROOT}/hack/openapi-violations.list}"
HEADER_FILE="${REPO_ROOT}/hack/boilerplate.go.txt"

INPUT_PKGS=(
  k8s.io/api/core/v1
  k8s.io/api/coordination/v1
  k8s.io/api/discovery/v1
  k8s.io/api/events/v1
  k8s.io/api/networking/v1
  k8s.io/apimachinery/pkg/apis/meta/v1
  k8s.io/apimachinery/pkg/runtime
  k8s.io/apimachinery/pkg/version
  k8s.io/apimachinery/pkg/util/intstr
  k8s.io/apimachinery/pkg/api/resource
)

# Pin the generator to the kube-openapi version the module already depends on,
# so the generated code always matches the k8s.io/kube-openapi/pkg/common
# runtime it is compiled against.
KUBE_OPENAPI_VERSION="$(go list -m -f '{{.Version}}' k8s.io/kube-openapi)"
if [[ -z "${KUBE_OPENAPI_VERSION}" ]]; then
  echo "update-openapi: k8s.io/kube-openapi is not in the module graph" >&2
  exit 1
fi

mkdir -p "${OUTPUT_DIR}" "$(dirname "${REPORT_FILE}")"

echo "update-openapi: openapi-gen@${KUBE_OPENAPI_VERSION} -> ${OUTPUT_DIR}/${OUTPUT_FILE}" >&2

# `go run pkg@version` builds the generator in its own module context (its own
# go.mod/go.sum, fetched from the module proxy) while the generator itself loads
# the input packages from this module, i.e. at the versions pinned in go.mod.
go run "k8s.io/kube-openapi/cmd/openapi-gen@${KUBE_OPENAPI_VERSION}" \
  --go-header-file "${HEADER_FILE}" \
  --output-dir "${OUTPUT_DIR}" \
  --output-pkg "${OUTPUT_PKG}" \
  --output-file "${OUTPUT_FILE}" \
  --report-filename "${REPORT_FILE}" \
  "${INPUT_PKGS[@]}"
