# shellcheck shell=bash
# shellcheck disable=SC2034 # used by tests/run and tests/meson.build
#
# tests/lists.sh: which integration tests the extra passes
# run, sourced by tests/run and read by tests/meson.build (the suites
# integration-off and cluster).

# The integration tests of the integration-cluster pass: the core file
# operations, two and three nodes, fetches and invalidations, none of
# which pokes at Redis itself.  A cluster takes ~2.5 s to start.
CLUSTER_TESTS="10-roundtrip 11-mmap 12-tar 20-immutable 32-dirs 33-stat-xattr
	37-close-to-open 38-writers-seal 41-two-nodes 60-fetch"

# The integration tests the integration-off pass leaves out (neither run
# nor reported; one line names them): their subject is the command line,
# mount(8), or Redis itself (topology, failovers, lost or corrupt records,
# the namespace's layout), not the file data path that passthrough=off
# changes.  What they read is a byte-exact check of sealed objects, and a
# READ through objfsd (fs_op_read) reads the store and waits on a fetch,
# never Redis: reads while Redis is down or changing stay in the pass
# through 24-redis-lost and 28-local-while-paused.  Not here: tests whose
# outcome may depend on the read path, such as 69-transport-option (bytes
# fetched, counted by path, while b reads a fetch) or 83-limits-named
# (descriptors under a limit of 256; passthrough opens backing files).
OFF_SKIP_TESTS="00-help 05-options 25-redis-empty-restart 26-bad-records
	50-mount-helper 70-sentinel-failover 71-cluster 72-lossy-failover
	84-rereg-namespace 111-layout-upgrade 113-layout3-upgrade"
