// Package etcdstore is the redfence command's store over etcd: --etcd URL
// to see and operate the locks that etcddriver Drivers hold.
//
// --etcd names a member of one cluster; repeat it, or separate URLs with
// commas, for more (default $ETCD_ENDPOINTS). URLs are http:// or https://
// (TLS with the system's roots). --etcd-token-base is the
// etcddriver.WithTokenBase of the Lockers looked at: tokens are shown, and
// release --token N is matched, with it. Before a command, every member
// named is asked for its status: one that cannot be reached is a warning
// while another answers; a learner, or a cluster without a leader (fewer
// than a majority of its members up), is refused, since no lock could be
// read or released through it.
package etcdstore
