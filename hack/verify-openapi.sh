#!/usr/bin/env bash
# Regenerates the OpenAPI definitions into a temporary directory with
# hack/update-openapi.sh and fails if they differ from the checked-in
# internal/generated/openapi/zz_generated.openapi.go or
# hack/openapi-violations.list.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${REPO_ROOT}"

TMP_DIR="$(mktemp -d)"
trap 'rm -rf "${TMP_DIR}"' EXIT

OPENAPI_OUTPUT_DIR="${TMP_DIR}/openapi" \
OPENAPI_REPORT_FILE="${TMP_DIR}/openapi-violations.list" \
  "${REPO_ROOT}/hack/update-openapi.sh"

status=0
if ! diff -u "${REPO_ROOT}/internal/generated/openapi/zz_generated.openapi.go" \
    "${TMP_DIR}/openapi/zz_generated.openapi.go"; then
  echo "verify-openapi: internal/generated/openapi/zz_generated.openapi.go is out of date" >&2
  status=1
fi
if ! diff -u "${REPO_ROOT}/hack/openapi-violations.list" \
    "${TMP_DIR}/openapi-violations.list"; then
  echo "verify-openapi: hack/openapi-violations.list is out of date" >&2
  status=1
fi
if [[ ${status} -ne 0 ]]; then
  echo "verify-openapi: run hack/update-openapi.sh" >&2
  exit 1
fi
echo "verify-openapi: OpenAPI definitions are up to date" >&2
