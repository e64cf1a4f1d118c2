package harness

import "testing"

func TestFailures(t *testing.T) {
	for _, tc := range []struct {
		name, out, want string
	}{
		{"passed", "=== RUN   TestX\n    x_test.go:10: a log line\n--- PASS: TestX (1.00s)\nPASS\n", "    x_test.go:10: a log line\n"},
		{
			"failed among server logs",
			"=== RUN   TestX\n    apiserver.go:108: logs of the server in /d:\n        I1203 16:59:51.044811   13775 alloc.go:329] \"allocated clusterIPs\"\n" +
				"        E1203 16:59:52.000000   13775 request.go:1198] \"Unexpected error\"\n    load_test.go:54: acknowledged create of w1-2 is lost\n--- FAIL: TestX (28.61s)\nFAIL\n",
			"    apiserver.go:108: logs of the server in /d:\n    load_test.go:54: acknowledged create of w1-2 is lost\n--- FAIL: TestX (28.61s)\n",
		},
		{"panic", "=== RUN   TestX\npanic: runtime error [recovered]\n\tgoroutine 1\n", "panic: runtime error [recovered]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := failures(tc.out); got != tc.want {
				t.Errorf("failures:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}
