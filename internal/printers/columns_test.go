package printers

import (
	"encoding/json"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// constructors maps each reference capture to the Table that must match it.
func constructors() map[string]func() *Table {
	return map[string]func() *Table{
		"namespaces":      Namespaces,
		"services":        Services,
		"endpoints":       Endpoints,
		"endpointslices":  EndpointSlices,
		"configmaps":      ConfigMaps,
		"secrets":         Secrets,
		"events":          Events,
		"leases":          Leases,
		"serviceaccounts": ServiceAccounts,
		"servicecidrs":    ServiceCIDRs,
		"ipaddresses":     IPAddresses,
	}
}

func TestColumnDefinitionsMatchReference(t *testing.T) {
	for resource, ctor := range constructors() {
		t.Run(resource, func(t *testing.T) {
			ref := loadReference(t, resource)
			got := ctor().columns

			// Field by field first, for a readable failure.
			var want []metav1.TableColumnDefinition
			if err := json.Unmarshal(ref.ColumnDefinitions, &want); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d columns, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("column %d:\n got %+v\nwant %+v", i, got[i], want[i])
				}
			}

			// And the JSON the server sends must be the captured JSON.
			var wantJSON interface{}
			if err := json.Unmarshal(ref.ColumnDefinitions, &wantJSON); err != nil {
				t.Fatal(err)
			}
			if gotJSON := asJSON(t, got); !reflect.DeepEqual(gotJSON, wantJSON) {
				t.Errorf("column JSON differs:\n got %v\nwant %v", gotJSON, wantJSON)
			}
		})
	}
}

func TestEveryColumnHasADescription(t *testing.T) {
	for resource, ctor := range constructors() {
		for _, c := range ctor().columns {
			if c.Description == "" {
				t.Errorf("%s: column %q has no description (missing SwaggerDoc key?)", resource, c.Name)
			}
		}
	}
}
