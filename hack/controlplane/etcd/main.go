// Command etcd is a thin wrapper around go.etcd.io/etcd/server/v3/etcdmain.
//
// go.etcd.io/etcd/server/v3 has replace directives in its go.mod, so it cannot
// be installed with `go install ...@version`; building it from this wrapper
// module works (see etcd-io/etcd#18501).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
