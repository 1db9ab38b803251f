// Package plan sizes cloud NFS services from their published performance models: given a
// throughput, capacity and IOPS need, it finds the smallest share, volume or file system of
// each service tier that meets it, how many clients (with and without nconnect) it takes to
// drive that throughput, what limits it, and, where a price is known (the built-in list,
// prices.yaml, or the user's), what it costs.
//
// The models' constants live in models.yaml (embedded), each with its source document and
// the date it was read; the formulas that combine them are Go functions, one per model kind.
// Sizes follow the vendors' binary convention: 1 TiB = 1024 GiB.
package plan
