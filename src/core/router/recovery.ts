import type { RouterCore } from './routerCore';

/** After a restart: every message not finished with is back in its inbox, with its deadlines. */
export function recover(core: RouterCore): void {
  const records = core.repo.liveMessages();
  core.store.transaction(() => {
    for (const record of records) {
      core.live.set(record.envelope.messageId, record);
      const inbox = core.inbox(record.recipientId);
      core.setState(record, record.state);
      if (record.delivery === 'inflight' && record.deliverySeq !== null) inbox.inflight.set(record.deliverySeq, record);
      else if (record.delivery === 'queued') inbox.queue.push(record.lane, record);
    }
    if (records.length) {
      core.log.record({ correlationId: core.ids.uuid(), actor: 'router', eventType: 'router.recovered', details: { messages: records.length } });
    }
  });
  for (const record of records) {
    core.timeouts.arm(record);
    if (record.tracked && record.delivery === 'inflight') core.timeouts.armLease(record);
  }
}
