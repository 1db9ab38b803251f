// Package scrape compares the cost of one Prometheus scrape of nfstune's NFS collector with
// node_exporter's mountstats collector on the same synthetic host. It is its own module so
// that node_exporter's dependencies stay out of nfstune's.
package scrape
