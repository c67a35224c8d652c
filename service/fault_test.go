package service_test

// The fault suite: 500 sandbox.allocate commands per case, one per track,
// through a crash, network faults, a drain under load and triple delivery,
// each ending with every command's allocation made once, recorded once and
// announced, and the table agreeing (docs/delivery.md). The commands, the producer
// and the checks are in faultkit_test.go; each case logs its counts as
// "fault NAME: commands=… applied=… lost=… doubled=… re-emitted=…". The
// kill -9 and triple-delivery cases also check their history for
// linearizability (linearizability_test.go).

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/service"
)

// TestFault_kill9_and_restart: the real binary is killed with SIGKILL with
// a third or more of the commands answered, and a new one takes over.
// What the dead process had received comes back after the visibility
// timeout; what it had applied but not published or acked is replayed.
func TestFault_kill9_and_restart(t *testing.T) {
	t.Parallel()
	s := newStack(t, faultConfig)
	r := newFaultRun(s, "kill9")
	first := s.startTransit(t)
	var second *transitProc
	r.drive(r.cmds, 2*time.Minute, func(done int) {
		if second != nil || done < len(r.cmds)/3 {
			return
		}
		_, inFlight := s.queueDepth(s.queueURL)
		code, _ := first.stop(t, syscall.SIGKILL, 5*time.Second)
		require.Equal(t, -1, code, "killed by the signal")
		t.Logf("SIGKILL with %d of %d commands answered, %d messages in flight", done, len(r.cmds), inFlight)
		second = s.startTransit(t)
	})
	require.NotNil(t, second, "the fault was injected")
	r.check(r.settle(time.Minute), 1)
	r.assertLinearizable()
}

// TestFault_network: transit talks to the emulators (moto and DynamoDB
// Local) through toxiproxy, and the network misbehaves under 500
// commands. The consumer is never restarted: it has to recover by itself.
// The cases run side by side, each on its own stack and proxies: much of
// each is waiting (the cut, the latency, visibility timeouts) that the
// others use.
func TestFault_network(t *testing.T) {
	t.Parallel()
	t.Run("cut", func(t *testing.T) {
		t.Parallel()
		// Every connection is closed and refused for 5 s, in the middle of
		// the run.
		s := newStack(t, faultConfig)
		n := newNetwork(t)
		r := newFaultRun(s, "network-cut")
		s.serveWith(n.service(s))
		restored := make(chan error, 1)
		var cutAt, resumedAt int
		r.drive(r.cmds, 2*time.Minute, func(done int) {
			switch {
			case cutAt == 0 && done >= len(r.cmds)/3:
				cutAt = done
				n.cut()
				timer := time.AfterFunc(5*time.Second, func() { restored <- n.restore() })
				t.Cleanup(func() { timer.Stop() }) // before the proxies stop, if the test ends early
			case cutAt > 0 && resumedAt == 0:
				select {
				case err := <-restored:
					require.NoError(t, err, "the proxy listens again")
					resumedAt = done
				default:
				}
			}
		})
		require.NotZero(t, resumedAt, "the network was cut and came back during the run")
		t.Logf("cut for 5s with %d commands answered; %d answered when it ended", cutAt, resumedAt)
		r.check(r.settle(time.Minute), 1)
	})

	t.Run("latency", func(t *testing.T) {
		t.Parallel()
		// 50–100 ms on every response for the whole run. With every call
		// slower, one receive loop (ten slots) is what limits throughput;
		// twenty slots give the subscriber two.
		s := newStack(t, faultConfig, func(c *config.Config) { c.Concurrency = 20 })
		n := newNetwork(t)
		require.NoError(t, n.addToxic(`{"name":"latency","type":"latency","stream":"downstream","attributes":{"latency":75,"jitter":25}}`))
		r := newFaultRun(s, "network-latency")
		s.serveWith(n.service(s))
		r.drive(r.cmds, 2*time.Minute, nil)
		r.check(r.settle(time.Minute), 1)
	})

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		// For 4 s every answer is swallowed (the requests still arrive and
		// are applied) and each connection is closed after a second
		// of silence: calls time out, and their retries and redeliveries
		// find the command already applied and replay it.
		s := newStack(t, faultConfig)
		n := newNetwork(t)
		r := newFaultRun(s, "network-timeout")
		s.serveWith(n.service(s))
		removed := make(chan error, 1)
		injectedAt := 0
		r.drive(r.cmds, 2*time.Minute, func(done int) {
			if injectedAt == 0 && done >= len(r.cmds)/3 {
				injectedAt = done
				require.NoError(t, n.addToxic(`{"name":"timeout","type":"timeout","stream":"downstream","attributes":{"timeout":1000}}`))
				timer := time.AfterFunc(4*time.Second, func() { removed <- n.removeToxic("timeout") })
				t.Cleanup(func() { timer.Stop() })
			}
		})
		require.NotZero(t, injectedAt, "the fault was injected")
		require.NoError(t, <-removed)
		r.check(r.settle(time.Minute), 1)
	})
}

// TestFault_sigterm_under_load: SIGTERM with commands in flight. The
// process must stop receiving, finish and ack what it holds, give back
// what it received but had not started, and exit 0 within its drain
// timeout; a new process does the rest. A clean drain leaves nothing to
// redeliver, so no event is emitted twice.
//
// The first process reaches the emulators through proxies that add 150 ms
// to every answer for the last moments before the signal, so that
// commands are mid-way (between their reads, writes, publish and ack) when
// SIGTERM arrives and the drain has real work to finish.
func TestFault_sigterm_under_load(t *testing.T) {
	t.Parallel()
	s := newStack(t, faultConfig)
	r := newFaultRun(s, "sigterm")
	const drain = 10 * time.Second
	env := "TRANSIT_DRAIN_TIMEOUT=" + drain.String()
	n := newNetwork(t)
	first := s.startTransit(t, append(n.env(), env)...)
	var second *transitProc
	r.drive(r.cmds, 2*time.Minute, func(done int) {
		if second != nil || done < len(r.cmds)/3 {
			return
		}
		require.NoError(t, n.addToxic(`{"name":"latency","type":"latency","stream":"downstream","attributes":{"latency":150}}`))
		time.Sleep(1500 * time.Millisecond) // the commands in flight become slow ones
		// Nothing is sent from here on until the second process starts,
		// so the queue's counts tell what the drain did.
		waitingBefore, inFlight := s.queueDepth(s.queueURL)
		code, took := first.stop(t, syscall.SIGTERM, drain+5*time.Second)
		waitingAfter, left := s.queueDepth(s.queueURL)
		// Received meanwhile, less given back: what the queue lost.
		taken := waitingBefore - waitingAfter
		acked := inFlight + taken - left
		errorsLogged := strings.Count(first.out.tail(1<<20), "level=ERROR")
		t.Logf("SIGTERM with %d of %d commands answered: exit %d after %s; %d in flight, %d more taken from the queue (received less given back), %d acked, %d left in flight; %d errors logged",
			done, len(r.cmds), code, took.Round(time.Millisecond), inFlight, taken, acked, left, errorsLogged)
		assert.Equal(t, 0, code, "a drained process exits 0")
		assert.Less(t, took, drain, "drained within TRANSIT_DRAIN_TIMEOUT")
		assert.Positive(t, acked, "the drain finished and acked commands that were in flight")
		// What is left in flight was handed to the process by a receive
		// that shutdown cut short: neither handled nor given back, it waits
		// out the visibility timeout (60 s by default) before another
		// process may take it. See transport/subscriber.go, receive.
		assert.Zero(t, left, "messages received before SIGTERM were neither acked nor given back to the queue")
		require.NoError(t, n.removeToxic("latency"))
		second = s.startTransit(t, env)
	})
	require.NotNil(t, second, "the fault was injected")
	// r.check asserts the contract: nothing lost, nothing applied twice,
	// every re-emitted event the same event (same ID). A re-emission is
	// allowed: a message handed out as the stop began can be processed by
	// this process and, rarely, redelivered to the next (seen once in ~15
	// runs); it is logged so a trend shows.
	got := r.check(r.settle(time.Minute), 1)
	t.Logf("re-emitted after the drain: %d", got.reemitted)
}

// TestFault_every_command_three_times: each of the 500 commands is
// delivered three times with the same ID: twice in a row, so the two
// copies usually arrive in one receive and race each other, and once more
// after all the others, a late redelivery. Each delivery answers with the
// same event; the allocation happens once.
func TestFault_every_command_three_times(t *testing.T) {
	t.Parallel()
	s := newStack(t, faultConfig)
	r := newFaultRun(s, "three-times")
	s.serve(service.ServeOptions{})
	var deliveries []command
	for _, c := range r.cmds {
		deliveries = append(deliveries, c, c)
	}
	r.drive(append(deliveries, r.cmds...), 4*time.Minute, nil)
	evs := r.settle(time.Minute)
	r.check(evs, 3)
	r.assertLinearizable()
	perEvent := map[string]int{}
	for _, e := range evs {
		perEvent[e.MessageID]++
	}
	answeredThrice := 0
	for _, c := range r.cmds {
		if perEvent[r.eventID(c)] >= 3 {
			answeredThrice++
		}
	}
	assert.Equal(t, len(r.cmds), answeredThrice, "every delivery answered with the command's event")
}
