// Package election elects one leader among candidates over any
// mutex.Locker, and gives each leadership a term that is a fencing token.
//
// A term is the election's lock held (key KeyPrefix + name): its number is
// the lock's fencing token, strictly greater than every earlier term of the
// election (backend rule 1), so it feeds a fence directly: pass
// Term.Token() as the token of the resources the leader writes (package
// fenced and its stores), and a deposed leader's late writes are refused
// even when it does not know it was deposed.
//
//	e, err := election.New(locker, "billing-scheduler")
//	err = e.Run(ctx, "host-7", func(ctx context.Context, t *election.Term) error {
//		return guard.Do(ctx, "billing", t.Token(), func(ctx context.Context, tx pgx.Tx) error { ... })
//	})
//
// What it guarantees depends on the backend, as the lock does:
//
//   - One Redis deployment (and Redlock): leadership is advisory. A leader
//     paused past its lease (GC, SIGSTOP, a cut network) believes it leads
//     until its term's context ends, which the renew deadline bounds by its
//     own clock; another may lead meanwhile. The term fences the resource:
//     a write checked against Term.Token is refused once a newer term
//     wrote. A Redis failover that loses the lock can elect a second leader
//     before the first one's lease ran out; the fence still orders them.
//   - A consensus backend (the etcd module): the lock itself is
//     linearizable, so two terms overlap only through the leader's own
//     clock (drift margin) and its pauses; the fence is still what makes
//     late writes harmless.
//
// A term that ended is not yet fenced out: its token stays the resource's
// highest, and a fence accepts its late writes, until a newer term writes;
// then they are refused. A leader stops writing at once by writing on
// Term.Context (the fences check it before any round trip), as Run's fn
// gets it.
//
// Campaign blocks until a candidate leads; Term.Context ends when
// leadership does, with the cause; Term.Release gives it up. Run is the loop most
// callers want: campaign, run fn as leader, and when leadership ends wait
// for fn before letting the lock go and campaigning again. Leader tells who
// leads; Observe streams terms in order.
//
// A term journal (backend.TermJournal: the single-deployment Redis driver
// keeps it in a capped stream beside the lock key, the etcd module's
// etcddriver in keys beside it, compared in a transaction, pgdriver in two
// tables ordered by a row lock) records every
// term once, refusing a term not above the last one. Campaign returns only
// journaled terms, Observe reads the journal (every term in order while
// connected), lock-delay knows whether the last term was resigned. Without
// one (Redlock), Observe polls Leader and may miss terms shorter than the
// retry period, and lock-delay applies to every term. On Redis and etcd
// the journal expires 24 h after its last entry (a term may last longer;
// pgdriver keeps it): Leader then reads the holder from inspection, and
// the next term waits the lock-delay.
//
// Timing follows client-go's leaderelection (WithTTL, WithRenewDeadline,
// WithRetryPeriod), mapped onto the Locker: the lease is the lock's TTL, a
// leader renews every retry period and its term ends when no renewal
// succeeded within the renew deadline; candidates retry a held lock every
// retry period at most (release notifications wake them sooner). New
// refuses timings that break the rules, naming the rule.
//
// The leader's value is readable from outside the process: it travels in
// the lock's owner id (admin.Inspect, the redfence command's elections)
// and in the journal. Candidacies lists a process's own campaigns and terms,
// which mutex/lockdebug shows (Named.Elections).
package election
