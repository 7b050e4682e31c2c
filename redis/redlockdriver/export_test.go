package redlockdriver

// NodeResting reports whether node i of d rests after failing to answer.
func NodeResting(d *Driver, i int) bool { return d.rests[i].until.Load() != 0 }

// LateNodes are the nodes still answering the acquisition when the lock
// whose Grant.Handle is h was won.
func LateNodes(h any) []int { return h.(*hold).lateNodes }

// Settled is closed once h's late nodes carry its token (nil: none late).
func Settled(h any) <-chan struct{} { return h.(*hold).settled }
