import { strict as assert } from 'node:assert';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import {
  age,
  describeMessageFilter,
  isMessageFilterSet,
  messageDetailText,
  messageQuery,
  messageRow,
  refusalText,
} from '../../src/extension/messagesModel';
import { RouterHarness } from '../support/routerHarness';

describe("the Messages view's text (no vscode)", () => {
  it('puts type and state first in a row, then producer → recipient, age and the correlation id', () => {
    const row = messageRow(
      {
        messageId: 'm-1',
        messageType: 'DATA',
        producerId: 'coordinator',
        recipientId: 'echo-1',
        state: 'TIMED_OUT',
        errorCode: 'ACK_TIMEOUT',
        correlationId: '0123456789abcdef',
        contentType: 'text/plain',
        size: 5,
        tracked: true,
        acceptedAt: 0,
        updatedAt: 0,
      },
      125_000,
    );
    assert.equal(row.label, 'DATA · TIMED_OUT ACK_TIMEOUT');
    assert.equal(row.description, 'coordinator → echo-1 · 2 min · 01234567');
    assert.match(row.tooltip, /correlation 0123456789abcdef/);
    assert.deepEqual([age(0, 59_000), age(0, 3_600_000), age(0, 86_400_000 * 2)], ['59 s', '1 h', '2 d']);
  });

  it("describes a filter and turns it into the core's query", () => {
    assert.equal(describeMessageFilter({}), undefined);
    assert.equal(isMessageFilterSet({}), false);
    const filter = { agentId: 'a', state: 'FULFILLED', messageType: 'DATA', correlationId: 'c-1' };
    assert.equal(describeMessageFilter(filter), 'agent a · FULFILLED · DATA · correlation c-1');
    assert.deepEqual(messageQuery(filter, 50), { ...filter, limit: 50 });
  });

  it('says what a refusal means, without brackets from agent text', () => {
    assert.equal(
      refusalText('NO_ROUTE', "NO_ROUTE: no agent '[x](command:y)' is registered"),
      "NO_ROUTE — no such agent is registered. no agent 'x(command:y)' is registered",
    );
    assert.match(refusalText('BUFFER_FULL', 'BUFFER_FULL: full'), /inbox is full/);
  });

  it("writes a message's detail as text: lifecycle with the ACKs, envelope, and the payload as sent (never markup)", async () => {
    const h = new RouterHarness();
    const api = new InProcessCoordinatorApi(h.coordinator);
    try {
      h.register('a');
      h.register('b');
      const { sink } = h.stream('b');
      const m = h.sendData('a', 'b', { payload: { text: '<script>alert(1)</script>' } });
      h.ackDelivery('b', sink, m.messageId);
      const ack = h.ackEnvelope('b', m.messageId, 'RECEIVED');
      assert.ok(h.send(ack).accepted);
      const text = messageDetailText((await api.message(m.messageId))!);
      assert.match(text, new RegExp(`^DATA message ${m.messageId}`));
      assert.match(text, /state {8}RECEIVED/);
      assert.match(text, /Lifecycle\n {2}\S+Z {2}SENT +accepted/);
      assert.ok(text.includes(`RECEIVED   ack_received — caused by ACK ${ack.messageId}`), text);
      assert.match(text, /message_id {13}\S+/);
      assert.ok(text.includes('"text": "<script>alert(1)</script>"'), text);
    } finally {
      api.dispose();
      h.dispose();
    }
  });
});
