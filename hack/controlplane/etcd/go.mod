module local/federation/controlplane/etcd

go 1.24.0

require go.etcd.io/etcd/server/v3 v3.6.4
