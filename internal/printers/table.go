package printers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Table converts objects of one resource to Tables. It implements
// k8s.io/apiserver/pkg/registry/rest.TableConvertor.
//
// A Table is immutable after construction and safe for concurrent use.
type Table struct {
	// resource names the resource in error messages.
	resource string
	// columns are the column definitions, in cell order.
	columns []metav1.TableColumnDefinition
	// cells returns one row's cells for a single (non-list) object, or an
	// error when the object is not of the type this table prints.
	cells func(obj runtime.Object, now time.Time) ([]interface{}, error)
	// now returns the current time for Age-like cells; nil means time.Now.
	// Tests pin it so ages are deterministic.
	now func() time.Time
}

// newTable builds a Table whose rows are produced by cells for objects of
// type P (a pointer to a v1 API type). Any other type, including a nil
// pointer, is rejected with an error.
func newTable[E any, P interface {
	*E
	runtime.Object
}](resource string, columns []metav1.TableColumnDefinition, cells func(obj P, now time.Time) []interface{}) *Table {
	return &Table{
		resource: resource,
		columns:  columns,
		cells: func(obj runtime.Object, now time.Time) ([]interface{}, error) {
			o, ok := obj.(P)
			if !ok {
				return nil, fmt.Errorf("printers: %s table cannot print an object of type %T; want %T", resource, obj, P(nil))
			}
			if o == nil {
				return nil, fmt.Errorf("printers: %s table cannot print a nil %T", resource, obj)
			}
			return cells(o, now), nil
		},
	}
}

// ConvertToTable converts obj, a single object or a list of objects of the
// table's resource, to a Table. The list's resourceVersion, continue token and
// remaining item count are copied into the Table's ListMeta; for a single
// object, its resourceVersion is copied. Each row's Object holds the printed object
// itself; the apiserver's handler replaces it according to includeObject.
//
// tableOptions may be nil or a *metav1.TableOptions; with NoHeaders set the
// column definitions are omitted. Any other options type is an error.
func (t *Table) ConvertToTable(_ context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	noHeaders := false
	switch opts := tableOptions.(type) {
	case nil:
	case *metav1.TableOptions:
		if opts != nil {
			noHeaders = opts.NoHeaders
		}
	default:
		return nil, fmt.Errorf("printers: unrecognized type %T for table options, can't display tabular output", tableOptions)
	}
	if obj == nil {
		return nil, fmt.Errorf("printers: %s table cannot print a nil object", t.resource)
	}

	now := time.Now
	if t.now != nil {
		now = t.now
	}
	at := now()

	table := &metav1.Table{}
	if meta.IsListType(obj) {
		items, err := meta.ExtractList(obj)
		if err != nil {
			return nil, fmt.Errorf("printers: %s table: %w", t.resource, err)
		}
		table.Rows = make([]metav1.TableRow, 0, len(items))
		for _, item := range items {
			row, err := t.row(item, at)
			if err != nil {
				return nil, err
			}
			table.Rows = append(table.Rows, row)
		}
		if list, err := meta.ListAccessor(obj); err == nil {
			table.ResourceVersion = list.GetResourceVersion()
			table.Continue = list.GetContinue()
			table.RemainingItemCount = list.GetRemainingItemCount()
		}
	} else {
		row, err := t.row(obj, at)
		if err != nil {
			return nil, err
		}
		table.Rows = []metav1.TableRow{row}
		if m, err := meta.CommonAccessor(obj); err == nil {
			table.ResourceVersion = m.GetResourceVersion()
		}
	}

	if !noHeaders {
		table.ColumnDefinitions = slices.Clone(t.columns)
	}
	return table, nil
}

// row prints one object.
func (t *Table) row(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	cells, err := t.cells(obj, now)
	if err != nil {
		return metav1.TableRow{}, err
	}
	return metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: obj}}, nil
}

// column returns a string column shown by plain `kubectl get`.
func column(name, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Description: description}
}

// wideColumn returns a string column shown only by `kubectl get -o wide`.
func wideColumn(name, description string) metav1.TableColumnDefinition {
	c := column(name, description)
	c.Priority = 1
	return c
}

// nameColumn is the leading Name column most resources share.
func nameColumn() metav1.TableColumnDefinition {
	c := column("Name", metav1.ObjectMeta{}.SwaggerDoc()["name"])
	c.Format = "name"
	return c
}

// ageColumn is the Age column derived from metadata.creationTimestamp.
func ageColumn() metav1.TableColumnDefinition {
	return column("Age", metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"])
}

// age renders the time elapsed since ts the way kubectl does ("5s", "3m20s",
// "2d"), or "<unknown>" when ts is unset.
func age(ts metav1.Time, now time.Time) string {
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(ts.Time))
}

// microAge is age for a metav1.MicroTime.
func microAge(ts metav1.MicroTime, now time.Time) string {
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(ts.Time))
}

// orNone returns s, or "<none>" when s is empty.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// joinWithMore joins the first limit entries of list with commas and, when
// total exceeds limit, appends " + N more..." for the N entries left out.
func joinWithMore(list []string, total, limit int) string {
	if len(list) > limit {
		list = list[:limit]
	}
	s := strings.Join(list, ",")
	if total > limit {
		return fmt.Sprintf("%s + %d more...", s, total-limit)
	}
	return s
}

// docAsIn136 returns doc[field] with a leading JSON field name replaced by
// subject. k8s.io/api v0.37 starts some descriptions with the JSON field name
// ("cidrs defines ...") where the v0.36 docs kube-apiserver 1.36 serves used
// the Go field name ("CIDRs defines ..."); this keeps 1.36's wording while the
// rest of the text still comes from SwaggerDoc.
func docAsIn136(doc map[string]string, field, subject string) string {
	if rest, ok := strings.CutPrefix(doc[field], field+" "); ok {
		return subject + " " + rest
	}
	return doc[field]
}
