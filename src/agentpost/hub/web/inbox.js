// Unread counts from the member's inbox (long poll, with the token in a header). An item is
// read once its room was shown; the acked cursor only moves over items that were read, so an
// unread wake-up in another room is never acknowledged by looking elsewhere.

import * as api from "./api.js";

const SEEN_KEY = "agentpost.seen";

export class Inbox {
  /** acked: the member's acked cursor; onChange(countsByRoom); onNew(items): wake-ups that
   * arrived while the page was open (not the backlog found at sign-in). */
  constructor(acked, onChange, onNew = () => {}) {
    this.acked = acked;
    this.after = acked;
    this.onChange = onChange;
    this.onNew = onNew;
    this.first = true;
    this.items = new Map(); // cursor → room id
    this.seen = new Set(JSON.parse(sessionStorage.getItem(SEEN_KEY) || "[]"));
    this.showing = null;
    this.abort = new AbortController();
    this.stopped = false;
    this.loop();
  }

  stop() {
    this.stopped = true;
    this.abort.abort();
  }

  async loop() {
    let pause = 500;
    while (!this.stopped) {
      try {
        const res = await api.call("GET", `/v1/inbox?after=${this.after}&wait=${this.first ? 0 : 25}&limit=500`, {
          signal: this.abort.signal,
        });
        for (const item of res.body.items) this.items.set(item.cursor, item.event.room);
        this.after = Math.max(this.after, res.body.cursor);
        if (!this.first && res.body.items.length) this.onNew(res.body.items);
        this.first = false;
        pause = 500;
        if (this.showing) this.markSeen(this.showing);
        else this.changed();
      } catch (err) {
        if (this.stopped || err.name === "AbortError") return;
        if (err instanceof api.HubError && err.status < 500) return; // 401 signs out
        await new Promise((done) => setTimeout(done, pause));
        pause = Math.min(pause * 2, 8000);
      }
    }
  }

  /** The room on screen: its items are read now and while it stays on screen. */
  show(roomId) {
    this.showing = roomId;
    if (roomId) this.markSeen(roomId);
  }

  markSeen(roomId) {
    for (const [cursor, room] of this.items) if (room === roomId) this.seen.add(cursor);
    let upTo = this.acked;
    for (const cursor of [...this.items.keys()].sort((a, b) => a - b)) {
      if (!this.seen.has(cursor)) break;
      upTo = cursor;
    }
    if (upTo > this.acked) {
      for (const cursor of [...this.items.keys()]) {
        if (cursor <= upTo) {
          this.items.delete(cursor);
          this.seen.delete(cursor);
        }
      }
      this.acked = upTo;
      api.call("POST", "/v1/inbox/ack", { json: { cursor: upTo } }).catch(() => {
        // Not acked this time: the items come back after a reload, as unread, never lost.
      });
    }
    sessionStorage.setItem(SEEN_KEY, JSON.stringify([...this.seen]));
    this.changed();
  }

  changed() {
    const counts = new Map();
    for (const [cursor, room] of this.items) {
      if (!this.seen.has(cursor)) counts.set(room, (counts.get(room) || 0) + 1);
    }
    this.onChange(counts);
  }
}
