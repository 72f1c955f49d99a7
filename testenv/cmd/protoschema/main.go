// Prints, as JSON, the protobuf layout of every built-in Kubernetes type served by the apiserver
// (src/represent/protobuf/schema.json; docs/design.md, "Representations"). Levee writes protobuf
// from each object's JSON, and the layout it needs is the Go types' rather than generated.proto's:
// the generated marshallers always write a field that is not a pointer (an empty string, a zero,
// an empty message), write pointers only when set, sort map keys, and inline embedded structs in
// JSON but nest them in protobuf. Only reflection over the Go types tells which is which.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
)

// Field is one protobuf field of a message, found in JSON under its name (or, inline, in the
// enclosing object itself).
type Field struct {
	JSON   string `json:"json,omitempty"`
	Number int    `json:"num"`
	Type   string `json:"type"`
	// Repeated: a JSON array, each element written as the field.
	Repeated bool `json:"repeated,omitempty"`
	// Pointer: written only when the JSON holds a value (not absent, not null).
	Pointer bool `json:"pointer,omitempty"`
	// Inline: an embedded struct, its fields at the enclosing JSON object's level.
	Inline bool `json:"inline,omitempty"`
	// Map: a JSON object, each entry written as the field holding {1: key, 2: value}.
	MapValue string `json:"mapValue,omitempty"`
	// MapValuePointer: the map's value is written only when not null ([]byte values).
	MapValueNullable bool `json:"mapValueNullable,omitempty"`
}

type Schema struct {
	// Kinds: "apiVersion kind" to the message of that kind.
	Kinds map[string]string `json:"kinds"`
	// Messages: a message's fields, in field number order.
	Messages map[string][]Field `json:"messages"`
}

// Types whose protobuf form is their own, not their fields'.
var special = map[reflect.Type]string{
	reflect.TypeOf(metav1.Time{}):          "time",
	reflect.TypeOf(metav1.MicroTime{}):     "microtime",
	reflect.TypeOf(metav1.Duration{}):      "duration",
	reflect.TypeOf(metav1.FieldsV1{}):      "fieldsv1",
	reflect.TypeOf(resource.Quantity{}):    "quantity",
	reflect.TypeOf(intstr.IntOrString{}):   "intorstring",
	reflect.TypeOf(runtime.RawExtension{}): "rawextension",
}

var schemaOut = Schema{Kinds: map[string]string{}, Messages: map[string][]Field{}}

func name(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "protoschema: "+format+"\n", args...)
	os.Exit(1)
}

var marshaller = reflect.TypeOf((*interface{ MarshalToSizedBuffer([]byte) (int, error) })(nil)).Elem()

// valueType names how one value of Go type t is written.
func valueType(t reflect.Type, where string) string {
	if s, ok := special[t]; ok {
		return s
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int32:
		return "int32"
	case reflect.Int64, reflect.Int:
		return "int64"
	case reflect.Uint32:
		return "uint32"
	case reflect.Uint64:
		return "uint64"
	case reflect.Float64:
		return "double"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "bytes"
		}
		// A named list with its own message (authentication's ExtraValue): {1: repeated string}.
		if t.Name() != "" && t.Elem().Kind() == reflect.String && reflect.PointerTo(t).Implements(marshaller) {
			return "stringlist"
		}
	case reflect.Struct:
		addMessage(t)
		return name(t)
	}
	fail("%s: no protobuf form for %s", where, t)
	return ""
}

func addMessage(t reflect.Type) {
	n := name(t)
	if _, seen := schemaOut.Messages[n]; seen {
		return
	}
	schemaOut.Messages[n] = nil // marks it seen before its fields recurse
	fields := []Field{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("protobuf")
		if tag == "" {
			continue // TypeMeta and the like: carried by the envelope, not the message
		}
		where := n + "." + sf.Name
		parts := strings.Split(tag, ",")
		num, err := strconv.Atoi(parts[1])
		if err != nil {
			fail("%s: protobuf tag %q", where, tag)
		}
		jsonTag := strings.Split(sf.Tag.Get("json"), ",")
		f := Field{Number: num, JSON: jsonTag[0]}
		if jsonTag[0] == "-" {
			fail("%s: in protobuf but never in JSON", where)
		}
		inline := sf.Anonymous || strings.Contains(sf.Tag.Get("json"), ",inline")
		if inline && jsonTag[0] == "" {
			f.Inline, f.JSON = true, ""
		} else if jsonTag[0] == "" {
			fail("%s: no JSON name", where)
		}
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			f.Pointer = true
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Map:
			if ft.Key().Kind() != reflect.String {
				fail("%s: map key %s", where, ft.Key())
			}
			f.Type = "map"
			f.MapValue = valueType(ft.Elem(), where)
			f.MapValueNullable = f.MapValue == "bytes"
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 && !(ft.Name() != "" && reflect.PointerTo(ft).Implements(marshaller)):
			et := ft.Elem()
			if et.Kind() == reflect.Pointer {
				fail("%s: a list of pointers", where)
			}
			f.Repeated = true
			f.Type = valueType(et, where)
		default:
			f.Type = valueType(ft, where)
		}
		if f.Inline && !(ft.Kind() == reflect.Struct && special[ft] == "") {
			fail("%s: inline %s", where, ft)
		}
		fields = append(fields, f)
	}
	sort.Slice(fields, func(i, j int) bool { return fields[i].Number < fields[j].Number })
	schemaOut.Messages[n] = fields
}

func main() {
	s := runtime.NewScheme()
	// CustomResourceDefinitions are left out: their schemas' JSON is their own (apiextensions' JSON,
	// JSONSchemaPropsOrArray), not their fields'; their protobuf stays the apiserver's to write.
	for _, add := range []func(*runtime.Scheme) error{scheme.AddToScheme} {
		if err := add(s); err != nil {
			fail("%v", err)
		}
	}
	// The meta types every group answers with, and the metadata-only forms.
	metav1.AddToGroupVersion(s, metav1.SchemeGroupVersion)
	for _, o := range []runtime.Object{&metav1.Status{}, &metav1.WatchEvent{}, &metav1.PartialObjectMetadata{}, &metav1.PartialObjectMetadataList{}} {
		s.AddKnownTypes(metav1.SchemeGroupVersion, o)
	}
	s.AddKnownTypes(metav1beta1.SchemeGroupVersion, &metav1beta1.PartialObjectMetadataList{})
	s.AddKnownTypeWithName(metav1beta1.SchemeGroupVersion.WithKind("PartialObjectMetadata"), &metav1.PartialObjectMetadata{})

	for gvk, t := range s.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || t.Kind() != reflect.Struct {
			continue
		}
		// Option types (ListOptions, DeleteOptions, ...) registered in every group version are
		// parameters, not answers; the meta group's Status and WatchEvent are kept.
		if strings.HasSuffix(gvk.Kind, "Options") || (gvk.Kind == "Status" && gvk.Group != "") || (gvk.Kind == "WatchEvent" && gvk.Group != "") {
			continue
		}
		if _, ok := reflect.PointerTo(t).MethodByName("MarshalToSizedBuffer"); !ok {
			continue // no protobuf form at all
		}
		addMessage(t)
		schemaOut.Kinds[gvk.GroupVersion().String()+" "+gvk.Kind] = name(t)
	}
	out, err := json.Marshal(schemaOut)
	if err != nil {
		fail("%v", err)
	}
	os.Stdout.Write(append(out, '\n'))
}
