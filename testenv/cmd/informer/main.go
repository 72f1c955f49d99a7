// A client-go shared informer run against a server (Levee, in the tests), as a controller or an
// agent would run one. It prints "synced" once its cache has synced, then, for every line read on
// stdin, the objects it holds as name@resourceVersion, sorted, on one line; it exits when stdin
// closes. client-go 1.35+ lists through watch-list and prefers protobuf, so this exercises both;
// -json makes it ask for JSON, as CRD and dynamic clients do. -label-selector narrows it.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

func main() {
	server := flag.String("server", "", "server URL")
	token := flag.String("token", "", "bearer token")
	ca := flag.String("ca", "", "CA file")
	namespace := flag.String("namespace", "", "namespace to watch")
	json := flag.Bool("json", false, "ask for JSON instead of protobuf")
	labelSelector := flag.String("label-selector", "", "label selector")
	flag.Parse()

	cfg := &rest.Config{Host: *server, BearerToken: *token, TLSClientConfig: rest.TLSClientConfig{CAFile: *ca}}
	if *json {
		cfg.ContentType = "application/json"
		cfg.AcceptContentTypes = "application/json"
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(clientset, 0, informers.WithNamespace(*namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = *labelSelector }))
	informer := factory.Core().V1().ConfigMaps().Informer()
	stop := make(chan struct{})
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, informer.HasSynced) {
		fmt.Fprintln(os.Stderr, "cache did not sync")
		os.Exit(1)
	}
	fmt.Println("synced")

	scanner := bufio.NewScanner(os.Stdin)
	for scanner.Scan() {
		var held []string
		for _, obj := range informer.GetStore().List() {
			m := obj.(metav1.Object)
			held = append(held, m.GetName()+"@"+m.GetResourceVersion())
		}
		sort.Strings(held)
		fmt.Println(strings.Join(held, " "))
	}
	close(stop)
}
