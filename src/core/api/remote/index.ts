/** The CoordinatorApi across threads: one generic proxy over a MessagePort (README: "The process model"). */
export { RemoteConnection, fromRemoteError } from './proxy';
export { RemoteServer, type CoalescedEvents } from './serve';
export { isEventName, toRemoteError, type RemoteError, type RemotePort } from './protocol';
