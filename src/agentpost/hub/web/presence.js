// Who is here and who got what (docs/presence.md, docs/delivery.md): the room's active
// participants marked online or not, as the room's stream pushes them (no poll), and shown
// as unknown while the stream is down; under the newest messages that woke someone a
// "read by … / acked by …" line from each message's delivery state. Delivery lines are
// asked for when the room opens and again when new events arrive (at most once every 2 s).

import * as api from "./api.js";

const DELIVERY_SETTLE_MS = 2000;
const DELIVERY_NEWEST = 10; // messages with targets whose line is kept fresh

/** The words of one delivery line, from a delivery state; "" when it woke no one. */
export function deliveryText(delivery) {
  const by = { acked: [], read: [], queued: [], removed: [] };
  for (const t of delivery.targets || []) (by[t.state] || by.queued).push(t.member);
  const parts = [];
  if (by.acked.length) parts.push(`acked by ${by.acked.join(", ")}`);
  if (by.read.length) parts.push(`read by ${by.read.join(", ")}`);
  if (by.queued.length) parts.push(`not read yet by ${by.queued.join(", ")}`);
  if (by.removed.length) parts.push(`removed: ${by.removed.join(", ")}`);
  if (!parts.length) return "";
  const text = parts.join(" · ");
  return text[0].toUpperCase() + text.slice(1);
}

export class Presence {
  /** list: the <ul> of participants; timeline: the room's Timeline. */
  constructor(list, timeline) {
    this.list = list;
    this.timeline = timeline;
    this.roomId = null;
    this.members = []; // the last pushed: [{name, kind, online, last_seen, worker}]
    this.deliveryTimer = null;
    this.deliveryDue = false;
  }

  open(room) {
    this.close();
    this.roomId = room.id;
    this.refreshDelivery();
  }

  close() {
    clearTimeout(this.deliveryTimer);
    this.deliveryTimer = null;
    this.deliveryDue = false;
    this.roomId = null;
    this.members = [];
    this.list.replaceChildren();
  }

  /** Names that may be mentioned: the room's active participants. */
  names() {
    return this.members.map((m) => m.name);
  }

  /** The stream pushed the room's active participants (removed members are not in it). */
  show(members) {
    this.members = members;
    this.draw(true);
  }

  /** The stream is down: nobody's presence is known until it is back. */
  unknown() {
    this.draw(false);
  }

  draw(known) {
    const items = [];
    for (const m of [...this.members].sort((a, b) => a.name.localeCompare(b.name))) {
      const online = known && Boolean(m.online);
      const item = document.createElement("li");
      item.className = online ? "person online" : "person";
      item.dataset.member = m.name;
      item.dataset.online = known ? String(online) : "unknown";
      const who = document.createElement("span");
      who.className = "person-name";
      who.textContent = m.name;
      const mark = document.createElement("span");
      mark.className = known ? "presence" : "presence unknown";
      mark.textContent = !known ? "unknown" : online ? "online" : m.last_seen ? "away" : "never seen";
      if (m.last_seen) mark.title = `last seen ${m.last_seen}`;
      item.append(who, " ", mark);
      if (known && m.worker && m.worker.live) {
        // The one Worker that holds this agent's lease (docs/connect.md "One Worker").
        const worker = document.createElement("span");
        worker.className = "worker";
        worker.textContent = `Worker on ${m.worker.host}`;
        worker.title = `pid ${m.worker.pid}, since ${m.worker.since}, fence ${m.worker.fence}`;
        item.append(" ", worker);
      }
      items.push(item);
    }
    this.list.replaceChildren(...items);
  }

  /** New events arrived: refresh the delivery lines once things settle. */
  eventsArrived() {
    if (this.roomId === null) return;
    if (this.deliveryTimer !== null) {
      this.deliveryDue = true;
      return;
    }
    this.refreshDelivery();
  }

  async refreshDelivery() {
    const roomId = this.roomId;
    this.deliveryDue = false;
    this.deliveryTimer = setTimeout(() => {
      this.deliveryTimer = null;
      if (this.deliveryDue) this.refreshDelivery();
    }, DELIVERY_SETTLE_MS);
    const ids = this.timeline.newestWithTargets(DELIVERY_NEWEST);
    await Promise.all(
      ids.map(async (id) => {
        try {
          const path = `/v1/rooms/${encodeURIComponent(roomId)}/events/${encodeURIComponent(id)}/delivery`;
          const { delivery } = (await api.call("GET", path)).body;
          if (roomId === this.roomId) this.timeline.showDelivery(id, deliveryText(delivery));
        } catch {
          // Kept as it was: the next new event asks again.
        }
      }),
    );
  }
}
