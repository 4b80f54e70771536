// Command etcd is a thin entry point around the etcd server library so the
// server can be built from the go.etcd.io/etcd/server/v3 module alone.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
