// Following one room live: a short-lived stream ticket (the EventSource cannot send the
// token), then the SSE stream. A dropped connection is resumed by the browser with
// Last-Event-ID while the ticket is fresh; after that with a new ticket and `after` = the
// last seq drawn. Either way the hub sends what came after: no gap, and the timeline draws
// an event once by its id, so no duplicate. The stream also pushes who of the room is
// online (`presence=1`: frames named "presence", no id), so nothing polls for it.

import * as api from "./api.js";

const RETRY_MS = [500, 1000, 2000, 4000, 8000];

export class RoomStream {
  /**
   * roomId: the room; after: the last seq already drawn;
   * onEvent(event): each event; onState(state, detail): "connecting" | "live" |
   * "reconnecting" | "stopped"; onPresence(members): the room's active participants.
   */
  constructor(roomId, after, onEvent, onState, onPresence = () => {}) {
    this.roomId = roomId;
    this.last = after;
    this.onEvent = onEvent;
    this.onState = onState;
    this.onPresence = onPresence;
    this.source = null;
    this.timer = null;
    this.failures = 0;
    this.closed = false;
    this.open();
  }

  async open() {
    if (this.closed) return;
    this.onState(this.failures ? "reconnecting" : "connecting");
    let ticket;
    try {
      const res = await api.call("POST", `/v1/rooms/${encodeURIComponent(this.roomId)}/stream-ticket`);
      ticket = res.body;
    } catch (err) {
      if (this.closed) return;
      if (err instanceof api.HubError && err.status < 500) {
        // 401 signs out (api.js); 403/404: this room is no longer ours to read.
        this.onState("stopped", err);
        return;
      }
      this.retryLater();
      return;
    }
    if (this.closed) return;
    const source = new EventSource(`${ticket.stream_url}&after=${this.last}&presence=1`);
    this.source = source;
    source.addEventListener("open", () => {
      this.failures = 0;
      this.onState("live");
    });
    source.addEventListener("event", (message) => {
      let event;
      try {
        event = JSON.parse(message.data);
      } catch (_) {
        return;
      }
      if (event.seq > this.last) this.last = event.seq;
      this.onEvent(event);
    });
    source.addEventListener("presence", (message) => {
      let body;
      try {
        body = JSON.parse(message.data);
      } catch (_) {
        return;
      }
      if (Array.isArray(body.members)) this.onPresence(body.members);
    });
    source.addEventListener("error", () => {
      if (this.closed || this.source !== source) return;
      if (source.readyState === EventSource.CLOSED) {
        // Refused (e.g. the ticket expired): a new ticket, from the last seq drawn.
        this.source = null;
        this.retryLater();
      } else {
        this.onState("reconnecting");
      }
    });
  }

  retryLater() {
    const wait = RETRY_MS[Math.min(this.failures, RETRY_MS.length - 1)];
    this.failures += 1;
    this.onState("reconnecting");
    this.timer = setTimeout(() => this.open(), wait);
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.source) this.source.close();
    this.source = null;
  }
}
