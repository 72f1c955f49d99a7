// Prints, as JSON, the columns of the Table the apiserver writes for each built-in kind
// (src/represent/table/columns.json; docs/design.md, "Representations"): the column definitions
// its printers register (k8s.io/kubernetes/pkg/printers/internalversion), keyed by group and
// kind, and ObjectMeta's descriptions that the default and custom resource tables use. The
// descriptions come from the Go types' documentation; only the printers themselves say which.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/printers"
	"k8s.io/kubernetes/pkg/printers/internalversion"
)

type recorder struct {
	columns map[string][]metav1.TableColumnDefinition
}

// The group of an internal API package (k8s.io/kubernetes/pkg/apis/<name>): its name, or the
// group it registers when that is longer.
var groups = map[string]string{
	"core":                  "",
	"discovery":             "discovery.k8s.io",
	"coordination":          "coordination.k8s.io",
	"networking":            "networking.k8s.io",
	"rbac":                  "rbac.authorization.k8s.io",
	"storage":               "storage.k8s.io",
	"scheduling":            "scheduling.k8s.io",
	"node":                  "node.k8s.io",
	"flowcontrol":           "flowcontrol.apiserver.k8s.io",
	"certificates":          "certificates.k8s.io",
	"admissionregistration": "admissionregistration.k8s.io",
	"apiserverinternal":     "internal.apiserver.k8s.io",
	"resource":              "resource.k8s.io",
	"storagemigration":      "storagemigration.k8s.io",
	"events":                "events.k8s.io",
	"lifecycle":             "lifecycle.k8s.io",
}

func (r *recorder) TableHandler(columns []metav1.TableColumnDefinition, printFunc interface{}) error {
	t := reflect.TypeOf(printFunc).In(0)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if strings.HasSuffix(t.Name(), "List") {
		return nil
	}
	pkg := t.PkgPath()
	name := pkg[strings.LastIndex(pkg, "/")+1:]
	group, ok := groups[name]
	if !ok {
		group = name
	}
	if strings.HasPrefix(pkg, "k8s.io/apimachinery/pkg/apis/meta") {
		group = "meta.k8s.io"
	}
	key := t.Name()
	if group != "" {
		key += "." + group
	}
	if _, dup := r.columns[key]; dup {
		fmt.Fprintf(os.Stderr, "tablecolumns: %s registered twice\n", key)
		os.Exit(1)
	}
	r.columns[key] = columns
	return nil
}

var _ printers.PrintHandler = &recorder{}

func main() {
	r := &recorder{columns: map[string][]metav1.TableColumnDefinition{}}
	internalversion.AddHandlers(r)
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	out := struct {
		Kinds    map[string][]metav1.TableColumnDefinition `json:"kinds"`
		Metadata map[string]string                         `json:"metadata"`
	}{r.columns, map[string]string{"name": meta["name"], "creationTimestamp": meta["creationTimestamp"]}}
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Stdout.Write(append(b, '\n'))
}
