// The search box: GET /v1/search over the rooms you take part in; each hit lists its room,
// sender and text with the matched words marked (built from the hub's highlight offsets
// with text nodes and <mark>, never from markup); choosing one opens the room at that event.

import * as api from "./api.js";

const LIMIT = 20;

/** The text with [start, end) code-point ranges wrapped in <mark>, as DOM nodes. */
export function marked(text, highlights) {
  const chars = Array.from(text); // code points: the hub's offsets count them
  const out = [];
  let at = 0;
  for (const [start, end] of highlights || []) {
    if (!(start >= at && end > start && end <= chars.length)) continue;
    if (start > at) out.push(document.createTextNode(chars.slice(at, start).join("")));
    const mark = document.createElement("mark");
    mark.textContent = chars.slice(start, end).join("");
    out.push(mark);
    at = end;
  }
  if (at < chars.length) out.push(document.createTextNode(chars.slice(at).join("")));
  return out;
}

export class Search {
  /** `onOpen(roomId, eventId)` opens a hit; `roomName(id)` names a room. */
  constructor({ form, box, results, status, more, clearButton, onOpen, roomName }) {
    Object.assign(this, { form, box, results, status, more, clearButton, onOpen, roomName });
    clearButton.addEventListener("click", () => {
      box.value = "";
      this.clear();
      box.focus();
    });
    this.query = "";
    this.before = null;
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.run(box.value, null);
    });
    more.addEventListener("click", () => this.run(this.query, this.before));
  }

  clear() {
    this.results.replaceChildren();
    this.status.textContent = "";
    this.more.hidden = true;
    this.clearButton.hidden = true;
  }

  async run(query, before) {
    if (!query.trim()) {
      this.clear();
      return;
    }
    const params = new URLSearchParams({ q: query, limit: String(LIMIT) });
    if (before) params.set("before", before);
    this.status.textContent = "Searching…";
    let body;
    try {
      body = (await api.call("GET", "/v1/search?" + params)).body;
    } catch (err) {
      if (!before) this.results.replaceChildren();
      this.more.hidden = true;
      this.status.textContent = `Search: ${err.message}`;
      return;
    }
    this.query = query;
    this.before = body.next_before;
    if (!before) this.results.replaceChildren();
    for (const hit of body.hits) this.results.append(this.item(hit));
    const n = this.results.children.length;
    this.status.textContent = n ? `${n} found` : "Nothing found";
    this.more.hidden = !body.next_before;
    this.clearButton.hidden = false;
  }

  item(hit) {
    const event = hit.event;
    const li = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "hit";
    // Not data-event-id: that names timeline events (docs/web.md).
    button.dataset.hitEvent = event.id;
    const head = document.createElement("span");
    head.className = "hit-head";
    head.textContent = `${this.roomName(event.room)} · ${event.sender}`;
    const text = document.createElement("span");
    text.className = "hit-text";
    text.append(...marked(event.text, hit.highlights));
    button.append(head, text);
    button.addEventListener("click", () => this.onOpen(event.room, event.id));
    li.append(button);
    return li;
  }
}
