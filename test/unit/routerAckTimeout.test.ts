import { strict as assert } from 'node:assert';
import { RouterHarness, settle } from '../support/routerHarness';

const P = 'producer';
const PULLER = 'puller';
const OTHER = 'other';
const SECOND = 1000;
const MINUTE = 60 * SECOND;
const ACK_TIMEOUT_MS = 10 * SECOND;

/**
 * A recipient's own ACK timeout (Router.setRecipientAckTimeout): an agent that pulls its inbox (the MCP bridge's
 * read_inbox) gets a longer deadline to RECEIVED; everyone else keeps the RFC §11 default of 10 s.
 */
describe("Router: a recipient's own ACK timeout", () => {
  let h: RouterHarness;

  afterEach(() => h.dispose());

  describe('with the default unicast routing', () => {
    beforeEach(() => {
      h = new RouterHarness();
      for (const id of [P, PULLER, OTHER]) h.register(id);
      h.router.setRecipientAckTimeout(PULLER, 30 * MINUTE);
    });

    it('keeps a message to an agent with a 30 min timeout SENT at 10 s and 29 min, TIMED_OUT at 30 min; others still time out at 10 s', async () => {
      const slow = h.sendData(P, PULLER);
      const fast = h.sendData(P, OTHER);
      const acceptedAt = h.clock.now();
      assert.equal(h.router.message(slow.messageId)!.ackDeadline, acceptedAt + 30 * MINUTE);
      assert.equal(h.router.message(fast.messageId)!.ackDeadline, acceptedAt + ACK_TIMEOUT_MS);

      h.clock.advance(ACK_TIMEOUT_MS);
      await settle();
      assert.equal(h.state(fast.messageId), 'TIMED_OUT', 'the RFC default for an agent without its own timeout');
      assert.equal(h.state(slow.messageId), 'SENT');

      h.clock.advance(29 * MINUTE - ACK_TIMEOUT_MS);
      await settle();
      assert.equal(h.state(slow.messageId), 'SENT', 'still waiting at 29 min');

      await h.timesOutAfter(slow.messageId, MINUTE);
      const [timedOut] = h.eventsFor('message.state_changed', slow.messageId);
      assert.deepEqual([timedOut.details.from, timedOut.details.to], ['SENT', 'TIMED_OUT']);
      assert.match(
        String(JSON.stringify(timedOut.details)),
        new RegExp(`within ${30 * MINUTE} ms`),
        'the reason names the timeout it had',
      );
    });

    it('is ended by RECEIVED as any other deadline: a pull after 20 min is in time', async () => {
      const m = h.sendData(P, PULLER);
      h.clock.advance(20 * MINUTE);
      h.acked(PULLER, m.messageId, 'RECEIVED');
      h.clock.advance(60 * MINUTE);
      await settle();
      assert.equal(h.state(m.messageId), 'RECEIVED');
    });

    it('applies to messages admitted after it was set or cleared; admitted ones keep their stored deadline', async () => {
      const before = h.sendData(P, OTHER);
      h.router.setRecipientAckTimeout(OTHER, 5 * MINUTE);
      const after = h.sendData(P, OTHER);
      h.router.setRecipientAckTimeout(PULLER, undefined);
      const cleared = h.sendData(P, PULLER);
      assert.equal(h.router.ackTimeoutOf(PULLER), ACK_TIMEOUT_MS);
      assert.equal(h.router.ackTimeoutOf(OTHER), 5 * MINUTE);

      h.clock.advance(ACK_TIMEOUT_MS);
      await settle();
      assert.equal(h.state(before.messageId), 'TIMED_OUT', 'admitted with the default: keeps it');
      assert.equal(h.state(cleared.messageId), 'TIMED_OUT', 'cleared: the default again');
      assert.equal(h.state(after.messageId), 'SENT');
      h.clock.advance(5 * MINUTE - ACK_TIMEOUT_MS);
      await settle();
      assert.equal(h.state(after.messageId), 'TIMED_OUT');
    });

    it('logs a change once (set, cleared), never a repeat of the same value, and nothing per message', () => {
      h.router.setRecipientAckTimeout(PULLER, 30 * MINUTE);
      h.router.setRecipientAckTimeout(PULLER, undefined);
      h.router.setRecipientAckTimeout(PULLER, undefined);
      for (let i = 0; i < 3; i++) h.sendData(P, PULLER);
      const events = h.events('router.recipient_ack_timeout').filter((e) => e.details.agent_id === PULLER);
      assert.deepEqual(
        events.map((e) => [e.details.ack_timeout_ms, e.details.own, e.details.previous_ms]),
        [
          [30 * MINUTE, true, ACK_TIMEOUT_MS],
          [ACK_TIMEOUT_MS, false, 30 * MINUTE],
        ],
      );
    });

    it('refuses a timeout that is not a whole number of ms ≥ 1', () => {
      for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
        assert.throws(() => h.router.setRecipientAckTimeout(OTHER, bad), RangeError, String(bad));
      }
      assert.equal(h.router.ackTimeoutOf(OTHER), ACK_TIMEOUT_MS, 'nothing was set');
    });

    it('survives a coordinator restart as the stored deadline (the owner sets the timeout again for new messages)', async () => {
      const m = h.sendData(P, PULLER);
      h.clock.advance(MINUTE);
      h.restart();
      assert.equal(h.router.ackTimeoutOf(PULLER), ACK_TIMEOUT_MS, 'in memory only: nobody set it again yet');
      h.clock.advance(ACK_TIMEOUT_MS);
      await settle();
      assert.equal(h.state(m.messageId), 'SENT', 'the message keeps the deadline it was admitted with');
      h.clock.advance(29 * MINUTE);
      await settle();
      assert.equal(h.state(m.messageId), 'TIMED_OUT');
    });
  });

  it("gives each fan-out copy its own recipient's timeout", async () => {
    h = new RouterHarness({ unaddressed: 'fanout' });
    for (const id of [P, PULLER, OTHER]) h.register(id);
    h.router.setRecipientAckTimeout(PULLER, 30 * MINUTE);
    const envelope = h.envelope(P, { payload: { n: 1 } });
    const result = h.send(envelope);
    assert.ok(result.accepted, result.accepted ? '' : result.reason);
    const copies = h.events('message.fanned_out')[0].details.copies as Array<{ to: string; message_id: string }>;
    const copyOf = (to: string) => copies.find((c) => c.to === to)!.message_id;
    const now = h.clock.now();
    assert.equal(h.router.message(copyOf(PULLER))!.ackDeadline, now + 30 * MINUTE);
    assert.equal(h.router.message(copyOf(OTHER))!.ackDeadline, now + ACK_TIMEOUT_MS);
    h.clock.advance(ACK_TIMEOUT_MS);
    await settle();
    assert.equal(h.state(copyOf(OTHER)), 'TIMED_OUT');
    assert.equal(h.state(copyOf(PULLER)), 'SENT');
  });
});
