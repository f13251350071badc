// A room's timeline: events drawn once each (by id), in seq order, as text — never HTML.
// Receipts get a badge (returned, failed, needs input, cancelled; never "completed") and a
// link to the message they answer; who was woken and why is in each event's details.
// Edits, reactions and redactions (docs/web.md) are drawn on the message they name, as the
// hub serves it (latest text, "edited", reactions, "Message deleted"); the relation events
// themselves keep their place in the list, hidden.

import * as api from "./api.js";

export const BADGES = {
  result: "returned",
  error: "failed",
  needs_input: "needs input",
  cancelled: "cancelled",
};

const ROUTES = {
  mention: "it mentions them",
  receipt: "a receipt goes back to the delegator",
  receipt_duplicate: "this delegation was answered already",
  receipt_undeliverable: "the delegator is gone",
  needs_input_limit: "too many questions on one delegation",
  master: "the room's master",
  master_fallback: "the master is gone: the live agents",
  master_unavailable: "the master is gone",
  no_mention: "an agent's message that mentions no one",
  not_participant: "those mentioned are not in the room",
  router: "picked by the room's router",
  router_none: "the room has no router",
  router_stop: "the router chose no one",
  sole_agent: "the only agent in the room",
  no_sole_agent: "no single agent to pick",
  depth_limit: "past the room's delegation depth limit: its mentions woke no one",
  wake_budget: "the room's wake budget of the minute is spent: its mentions woke no one",
  notice: "a notice of the hub",
};

const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
const URL_PATTERN = /\bhttps?:\/\/[^\s<>"']+/g;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Text with http(s) links made clickable; everything else stays a text node. */
export function textWithLinks(parent, text) {
  let at = 0;
  for (const match of text.matchAll(URL_PATTERN)) {
    const url = match[0].replace(/[.,;:!?)\]]+$/, "");
    if (match.index > at) parent.append(document.createTextNode(text.slice(at, match.index)));
    const link = el("a", "", url);
    link.href = url;
    link.rel = "noopener noreferrer";
    link.target = "_blank";
    parent.append(link);
    at = match.index + url.length;
  }
  if (at < text.length) parent.append(document.createTextNode(text.slice(at)));
}

export function humanSize(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

function timeText(iso) {
  const when = new Date(iso);
  if (Number.isNaN(when.getTime())) return iso;
  const sameDay = when.toDateString() === new Date().toDateString();
  return sameDay
    ? when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" })
    : when.toLocaleString();
}

async function download(attachment) {
  const data = await api.blob(`/v1/media/${encodeURIComponent(attachment.id)}`);
  const url = URL.createObjectURL(data);
  const link = el("a");
  link.href = url;
  link.download = attachment.name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

export class Timeline {
  constructor(list, onError) {
    this.list = list;
    this.onError = onError;
    this.byId = new Map();
    this.receipts = new Map(); // E1 id → [{sender, kind}]
    this.urls = [];
    this.maxDepth = null; // the room's max_delegation_depth, set by the page
    this.me = null; // the signed-in member's name: their own messages can be edited, deleted
    this.events = new Map(); // id → the event as last drawn
    this.onAction = () => {}; // (action, event): "reply" | "edit" | "delete", set by the page
  }

  clear() {
    this.list.replaceChildren();
    this.byId.clear();
    this.events.clear();
    this.receipts.clear();
    for (const url of this.urls) URL.revokeObjectURL(url);
    this.urls = [];
  }

  get oldest() {
    const first = this.list.firstElementChild;
    return first ? Number(first.dataset.seq) : null;
  }

  get newest() {
    const last = this.list.lastElementChild;
    return last ? Number(last.dataset.seq) : null;
  }

  has(id) {
    return this.byId.has(id);
  }

  /** Draw `event` again as the hub now serves it (after an edit, reaction, redaction). */
  replace(event) {
    const old = this.byId.get(event.id);
    if (!old) return false;
    const node = this.render(event);
    if (old.classList.contains("show-details")) {
      node.classList.add("show-details");
      const toggle = node.querySelector("[data-action=details]");
      if (toggle) toggle.setAttribute("aria-pressed", "true");
    }
    old.replaceWith(node);
    this.byId.set(event.id, node);
    this.events.set(event.id, event);
    if (this.receipts.has(event.id)) this.showReceipts(event.id);
    return true;
  }

  /** Draw `event` unless it is drawn already; true when it was new. */
  add(event) {
    if (!event || typeof event.id !== "string" || this.byId.has(event.id)) return false;
    const node = this.render(event);
    this.byId.set(event.id, node);
    this.events.set(event.id, event);
    let before = null;
    for (let at = this.list.lastElementChild; at; at = at.previousElementSibling) {
      if (Number(at.dataset.seq) < event.seq) break;
      before = at;
    }
    this.list.insertBefore(node, before);
    if (event.reply_kind && event.in_reply_to) {
      const seen = this.receipts.get(event.in_reply_to) || [];
      seen.push({ sender: event.sender, kind: event.reply_kind });
      this.receipts.set(event.in_reply_to, seen);
      this.showReceipts(event.in_reply_to);
    }
    if (this.receipts.has(event.id)) this.showReceipts(event.id);
    return true;
  }

  focusEvent(id) {
    const node = this.byId.get(id);
    if (!node || node.hidden) return false;
    node.scrollIntoView({ block: "center" });
    node.focus();
    return true;
  }

  /** The event as last drawn (its latest text after an edit). */
  event(id) {
    return this.events.get(id) || null;
  }

  /** How many drawn events are messages people see (not edits, reactions, redactions). */
  get shown() {
    let n = 0;
    for (const node of this.byId.values()) if (!node.hidden) n += 1;
    return n;
  }

  /** The ids of the newest `n` drawn events that woke someone, newest first. */
  newestWithTargets(n) {
    const ids = [];
    for (let at = this.list.lastElementChild; at && ids.length < n; at = at.previousElementSibling) {
      if (at.dataset.woke === "true") ids.push(at.dataset.eventId);
    }
    return ids;
  }

  showDelivery(id, text) {
    const node = this.byId.get(id);
    if (!node) return;
    const line = node.querySelector(".delivery");
    line.textContent = text;
    line.hidden = !text;
  }

  showReceipts(e1) {
    const node = this.byId.get(e1);
    if (!node) return;
    const line = node.querySelector(".reported");
    const parts = this.receipts.get(e1).map((r) => `${r.sender}: ${BADGES[r.kind] || r.kind}`);
    line.textContent = "Reported back — " + parts.join(", ");
    line.hidden = false;
  }

  render(event) {
    const item = el("li", "event");
    item.dataset.eventId = event.id;
    item.dataset.seq = String(event.seq);
    item.tabIndex = -1;
    if (event.relates_to) {
      // An edit, a reaction or a redaction: shown on its target, kept here for the order.
      item.hidden = true;
      item.dataset.relatesTo = event.relates_to;
      return item;
    }
    // A notice: a stored notice event, or a Worker's line marked `agentpost/notice` (docs/connect.md).
    const md = event.metadata || {};
    const notice = event.type === "notice" || typeof md["agentpost/notice"] === "string";
    if (notice) item.classList.add("notice");
    if (event.sender_kind === "agent") item.classList.add("from-agent");

    const meta = el("p", "meta");
    meta.append(el("span", "sender", event.sender));
    const kind = [event.sender_kind];
    if (event.type !== "message") kind.push(event.type);
    if (notice && event.type !== "notice") kind.push("notice");
    meta.append(el("span", "kind", kind.join(" · ")));
    const time = el("time", "time", timeText(event.created_at));
    time.dateTime = event.created_at;
    time.title = event.created_at;
    meta.append(time);
    meta.append(el("span", "seq", `#${event.seq}`));
    if (event.reply_kind) {
      const words = BADGES[event.reply_kind] || event.reply_kind;
      const badge = el("span", "badge badge-" + event.reply_kind.replace(/_/g, "-"), words);
      badge.dataset.replyKind = words;
      meta.append(badge);
    }
    const depth = this.depthLabel(event);
    if (depth) meta.append(depth);
    item.append(meta);

    if (notice) item.setAttribute("role", "note");
    if (event.redacted) {
      item.classList.add("redacted");
      const expired = event.metadata && event.metadata.retention;
      item.append(el("p", "text deleted", expired ? "Expired under the room's retention" : "Message deleted"));
    } else if (event.text) {
      const text = el("p", "text");
      textWithLinks(text, event.text);
      if (event.edited) text.append(this.editedMark(event));
      item.append(text);
    } else if (event.edited) {
      item.append(this.editedMark(event));
    }
    if (Array.isArray(event.attachments) && event.attachments.length) {
      item.append(this.renderAttachments(event.attachments));
    }
    if (Array.isArray(event.reactions) && event.reactions.length) {
      item.append(this.renderReactions(event.reactions));
    }
    if (event.in_reply_to) item.append(this.answersLink(event));
    if (Array.isArray(md.delegated_to) && md.delegated_to.length) {
      item.append(el("p", "delegation", `Delegates to ${md.delegated_to.join(", ")}`));
    }
    const reported = el("p", "reported");
    reported.hidden = true;
    item.append(reported);
    const targets = Array.isArray(event.targets) ? event.targets : [];
    item.dataset.woke = String(targets.length > 0);
    const delivery = el("p", "delivery");
    delivery.hidden = true;
    item.append(delivery);
    item.append(this.routing(event));
    item.append(this.actions(event));
    return item;
  }

  /** Reply, edit, delete and details: shown on hover or focus, reachable by Tab. */
  actions(event) {
    const bar = el("div", "actions");
    bar.setAttribute("role", "group");
    bar.setAttribute("aria-label", `Actions on #${event.seq}`);
    const who = `${event.sender} #${event.seq}`;
    const add = (action, words, label) => {
      const button = el("button", "", words);
      button.type = "button";
      button.dataset.action = action;
      button.setAttribute("aria-label", label);
      button.addEventListener("click", () => this.onAction(action, this.event(event.id) || event));
      bar.append(button);
      return button;
    };
    if (!event.redacted && event.type === "message") add("reply", "Reply", `Reply to ${who}`);
    const mine = this.me !== null && event.sender === this.me;
    if (mine && !event.redacted && event.type === "message") {
      if (event.text) add("edit", "Edit", `Edit #${event.seq}`);
      add("delete", "Delete", `Delete #${event.seq}`);
    }
    const details = add("details", "Details", `Delivery details of #${event.seq}`);
    details.setAttribute("aria-pressed", "false");
    details.addEventListener("click", () => {
      const item = this.byId.get(event.id);
      if (!item) return;
      const open = item.classList.toggle("show-details");
      details.setAttribute("aria-pressed", String(open));
    });
    return bar;
  }

  editedMark(event) {
    const mark = el("span", "edited", " (edited)");
    if (event.edited_at) mark.title = `edited ${event.edited_at}`;
    return mark;
  }

  /** Reactions under a message: each emoji with its count; its name says who reacted. */
  renderReactions(reactions) {
    const list = el("ul", "reactions");
    list.setAttribute("aria-label", "Reactions");
    for (const reaction of reactions) {
      const members = Array.isArray(reaction.members) ? reaction.members : [];
      const item = el("li", "reaction", `${reaction.emoji} ${reaction.count}`);
      const who = `${reaction.emoji} ${reaction.count}: ${members.join(", ")}`;
      item.setAttribute("aria-label", who);
      item.title = who;
      list.append(item);
    }
    return list;
  }

  /** "depth 3/8" on a delegation, or on a delegation stopped at the depth limit. */
  depthLabel(event) {
    const md = event.metadata || {};
    const depth = md.delegation_depth;
    const delegates = Array.isArray(md.delegated_to) && md.delegated_to.length > 0;
    if (!Number.isInteger(depth) || !(delegates || event.route === "depth_limit")) return null;
    const max = Number.isInteger(this.maxDepth) ? this.maxDepth : null;
    const label = el("span", "depth", max ? `depth ${depth}/${max}` : `depth ${depth}`);
    label.title = max
      ? `delegation depth ${depth} of at most ${max} in this room`
      : `delegation depth ${depth}`;
    if (max && depth > max) label.classList.add("over");
    return label;
  }

  answersLink(event) {
    const link = el("a", "answers");
    const target = this.byId.get(event.in_reply_to);
    link.textContent = target
      ? `Answers #${target.dataset.seq}`
      : "Answers an earlier message";
    link.href = "#" + event.in_reply_to;
    link.dataset.answers = event.in_reply_to;
    link.addEventListener("click", (click) => {
      click.preventDefault();
      this.onAnswerClick(event.in_reply_to);
    });
    const line = el("p", "answers-line");
    line.append(link);
    return line;
  }

  onAnswerClick(id) {
    // Replaced by the page: load older pages until the message is drawn.
    this.focusEvent(id);
  }

  routing(event) {
    const details = el("details", "routing");
    const targets = Array.isArray(event.targets) ? event.targets : [];
    details.append(
      el("summary", "", targets.length ? `Woke ${targets.join(", ")}` : "Woke no one"),
    );
    const why = el("dl");
    const add = (term, value) => {
      why.append(el("dt", "", term));
      why.append(el("dd", "", value));
    };
    if (event.route) add("Why", `${event.route}${ROUTES[event.route] ? " — " + ROUTES[event.route] : ""}`);
    const md = event.metadata || {};
    if (md.delegated_by) add("Delegated by", String(md.delegated_by));
    if (Array.isArray(md.delegated_to)) add("Delegated to", md.delegated_to.join(", "));
    add("Event", event.id);
    details.append(why);
    return details;
  }

  renderAttachments(attachments) {
    const list = el("ul", "attachments");
    for (const attachment of attachments) {
      const item = el("li", "attachment");
      if (IMAGE_TYPES.has(attachment.mime_type)) {
        const img = el("img", "thumb");
        img.alt = attachment.name;
        item.append(img);
        api
          .blob(`/v1/media/${encodeURIComponent(attachment.id)}`)
          .then((data) => {
            const url = URL.createObjectURL(data);
            this.urls.push(url);
            img.src = url;
          })
          .catch(() => {
            img.alt = `${attachment.name} (could not be loaded)`;
          });
      }
      const link = el("a", "download", attachment.name);
      link.href = `/v1/media/${encodeURIComponent(attachment.id)}`;
      link.addEventListener("click", (click) => {
        click.preventDefault();
        download(attachment).catch((err) => this.onError(`Download failed: ${err.message}`));
      });
      item.append(link);
      item.append(el("span", "size", ` ${humanSize(attachment.size)} · ${attachment.mime_type}`));
      list.append(item);
    }
    return list;
  }
}
