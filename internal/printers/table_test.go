package printers

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestListMetadataIsCopied(t *testing.T) {
	list := &corev1.ConfigMapList{
		ListMeta: metav1.ListMeta{ResourceVersion: "217", Continue: "next-page", RemainingItemCount: ptrTo(int64(4))},
		Items:    []corev1.ConfigMap{*cfgConfigMap(0), *trackingConfigMap(t, 5*s)},
	}
	tbl := convert(t, ConfigMaps(), list)

	if tbl.ResourceVersion != "217" || tbl.Continue != "next-page" {
		t.Errorf("list meta = %+v, want resourceVersion 217 and continue next-page", tbl.ListMeta)
	}
	if tbl.RemainingItemCount == nil || *tbl.RemainingItemCount != 4 {
		t.Errorf("remainingItemCount = %v, want 4", tbl.RemainingItemCount)
	}
	if len(tbl.Rows) != 2 {
		t.Fatalf("got %d rows, want 2", len(tbl.Rows))
	}
	for i, row := range tbl.Rows {
		if row.Object.Object != &list.Items[i] {
			t.Errorf("row %d object = %p, want the list item %p", i, row.Object.Object, &list.Items[i])
		}
	}
}

func TestSingleObject(t *testing.T) {
	cm := cfgConfigMap(0)
	cm.ResourceVersion = "42"
	tbl := convert(t, ConfigMaps(), cm)

	if tbl.ResourceVersion != "42" || tbl.Continue != "" || tbl.RemainingItemCount != nil {
		t.Errorf("list meta = %+v, want only resourceVersion 42", tbl.ListMeta)
	}
	if len(tbl.Rows) != 1 || tbl.Rows[0].Object.Object != cm {
		t.Fatalf("rows = %+v, want one row holding the object", tbl.Rows)
	}
	if len(tbl.ColumnDefinitions) != 3 {
		t.Errorf("got %d column definitions, want 3", len(tbl.ColumnDefinitions))
	}
}

func TestEmptyListHasNoRows(t *testing.T) {
	tbl := convert(t, Secrets(), &corev1.SecretList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}})
	if tbl.Rows == nil || len(tbl.Rows) != 0 {
		t.Errorf("rows = %#v, want an empty, non-nil slice (JSON [] rather than null)", tbl.Rows)
	}
	if tbl.ResourceVersion != "9" {
		t.Errorf("resourceVersion = %q, want 9", tbl.ResourceVersion)
	}
}

func TestTableOptions(t *testing.T) {
	tests := []struct {
		name        string
		options     runtime.Object
		wantColumns int
	}{
		{"nil options", nil, 4},
		{"nil *TableOptions", (*metav1.TableOptions)(nil), 4},
		{"headers", &metav1.TableOptions{}, 4},
		{"noHeaders", &metav1.TableOptions{NoHeaders: true}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tbl, err := pinned(Secrets()).ConvertToTable(context.Background(), opaqueSecret(0), tc.options)
			if err != nil {
				t.Fatal(err)
			}
			if len(tbl.ColumnDefinitions) != tc.wantColumns {
				t.Errorf("got %d column definitions, want %d", len(tbl.ColumnDefinitions), tc.wantColumns)
			}
			if len(tbl.Rows) != 1 || len(tbl.Rows[0].Cells) != 4 {
				t.Errorf("rows = %+v, want one row of 4 cells whatever the headers", tbl.Rows)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name    string
		obj     runtime.Object
		options runtime.Object
		wantErr string
	}{
		{"wrong object type", &corev1.Pod{}, nil, "*v1.Pod"},
		{"wrong list type", &corev1.PodList{Items: []corev1.Pod{{}}}, nil, "*v1.Pod"},
		{"nil object", nil, nil, "nil"},
		{"typed nil object", (*corev1.Service)(nil), nil, "nil"},
		{"wrong options type", headlessService(0), &metav1.ListOptions{}, "table options"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Services().ConvertToTable(context.Background(), tc.obj, tc.options)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error = %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
}

func TestColumnsAreNotShared(t *testing.T) {
	tbl := Services()
	first := convert(t, tbl, headlessService(0))
	first.ColumnDefinitions[0].Name = "mutated"
	if second := convert(t, tbl, headlessService(0)); second.ColumnDefinitions[0].Name != "Name" {
		t.Errorf("mutating one response changed the next: %q", second.ColumnDefinitions[0].Name)
	}
}

func TestAgeOfUnsetTimestamp(t *testing.T) {
	ns := namespaceObj("x", 0)
	ns.CreationTimestamp = metav1.Time{}
	if got := cells(t, Namespaces(), ns)[2]; got != "<unknown>" {
		t.Errorf("age = %v, want <unknown>", got)
	}
}
