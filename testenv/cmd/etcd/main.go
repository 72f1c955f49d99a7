// Command etcd is the etcd server at exactly the version k8s.io/kubernetes
// requires, so the test cluster's storage matches what the apiserver is built
// and tested against.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
