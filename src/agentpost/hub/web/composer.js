// The composer: a message gets its Idempotency-Key when it is composed and keeps it until
// the hub acknowledges it, so Send after a lost answer replays instead of posting twice.
// The draft (text and key) survives a reload in this tab's sessionStorage. Enter sends,
// Shift+Enter is a new line; the box grows with its text. A reply sets `in_reply_to` (and,
// to a delegation addressed to you, the `reply_kind` picked); an edit posts the new text
// as an edit of your message (docs/api.md "Relations"), retry-safe the same way.

import * as api from "./api.js";
import { humanSize } from "./timeline.js";

/** A fresh Idempotency-Key (getRandomValues: also outside a secure context, e.g. a hub
 * reached over plain http by its LAN address, where crypto.randomUUID is missing). */
export function newKey() {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function draftKey(roomId) {
  return "agentpost.draft." + roomId;
}

/** What is left of `draft` once `sent` was posted: what was typed after it, or "". */
function leftOver(draft, sent) {
  const rest = draft.startsWith(sent) ? draft.slice(sent.length) : draft;
  return rest.trim() ? rest.replace(/^\s*\n/, "") : "";
}

/** A send answered after its room was left: its draft there (still holding the posted
 * text and key) must not come back when the room is opened again. */
function forgetDraft(roomId, key, sent) {
  let saved;
  try {
    saved = JSON.parse(sessionStorage.getItem(draftKey(roomId)) || "null");
  } catch (_) {
    return;
  }
  if (!saved || saved.key !== key) return;
  const rest = leftOver(saved.text, sent);
  if (rest) sessionStorage.setItem(draftKey(roomId), JSON.stringify({ text: rest, key: newKey() }));
  else sessionStorage.removeItem(draftKey(roomId));
}

export class Composer {
  /** form, box (textarea), file (input), status (line); onPosted(event) draws it. */
  /** context: {box, text, kindLabel, kind, cancel} of the reply/edit line; chosen: the
   * line naming the file picked; mentions: the completion list (mentions.js). */
  constructor({ form, box, file, button, status, onPosted, context, chosen, mentions }) {
    Object.assign(this, { form, box, file, button, status, onPosted, context, chosen, mentions });
    this.roomId = null;
    this.key = null;
    this.busy = false;
    this.maxUpload = null;
    this.replyTo = null; // the event answered
    this.editing = null; // your event whose text is being edited
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.send();
    });
    box.addEventListener("input", () => {
      this.composed();
      this.grow();
    });
    file.addEventListener("change", () => {
      this.composed();
      this.showChosen();
    });
    box.addEventListener("keydown", (ev) => {
      // An input method's keys (Enter commits its text) are its own: they neither pick a
      // mention nor send. Safari marks the committing Enter by keyCode 229 only.
      if (ev.isComposing || ev.keyCode === 229) return;
      if (this.mentions && this.mentions.handleKey(ev)) return;
      if (ev.key === "Enter" && !ev.shiftKey) {
        ev.preventDefault();
        this.send();
      } else if (ev.key === "Escape" && (this.replyTo || this.editing)) {
        ev.preventDefault();
        this.cancelContext();
      }
    });
    context.cancel.addEventListener("click", () => {
      this.cancelContext();
      this.box.focus();
    });
  }

  /** The box is as tall as its text (one row when empty), up to the CSS max-height. */
  grow() {
    if (!this.box.value) {
      this.box.style.height = ""; // one row (rows=1): a placeholder never makes it taller
      return;
    }
    this.box.style.height = "auto";
    this.box.style.height = `${this.box.scrollHeight + 2}px`;
  }

  showChosen() {
    const picked = this.file.files[0];
    this.chosen.hidden = !picked;
    this.chosen.textContent = picked ? `File: ${picked.name} (${humanSize(picked.size)})` : "";
  }

  /** Answer `event`; `receiptKinds`: offer the kinds of a receipt (a delegation to you). */
  replyToEvent(event, receiptKinds) {
    this.leaveEdit();
    this.replyTo = event;
    const words = (event.text || "").replace(/\s+/g, " ").slice(0, 80);
    this.context.text.textContent = `Replying to ${event.sender} #${event.seq}: ${words}`;
    this.context.kind.value = "";
    this.context.kind.hidden = !receiptKinds;
    this.context.kindLabel.hidden = !receiptKinds;
    this.context.cancel.textContent = "Cancel reply";
    this.context.box.hidden = false;
    this.box.focus();
  }

  /** Edit your own `event`: the box holds its text until Send or Cancel. */
  editEvent(event) {
    this.replyTo = null;
    if (!this.editing) this.stash = { text: this.box.value, key: this.key };
    this.editing = event;
    this.key = null; // an edit is a request of its own, with its own key
    this.box.value = event.text || "";
    this.context.text.textContent = `Editing your message #${event.seq}`;
    this.context.kind.hidden = true;
    this.context.kindLabel.hidden = true;
    this.context.cancel.textContent = "Cancel edit";
    this.context.box.hidden = false;
    this.grow();
    this.box.focus();
  }

  leaveEdit() {
    if (!this.editing) return;
    this.editing = null;
    const stash = this.stash || { text: "", key: null };
    this.stash = null;
    this.box.value = stash.text;
    this.key = stash.key;
    this.grow();
  }

  cancelContext() {
    this.leaveEdit();
    this.replyTo = null;
    this.context.box.hidden = true;
    this.context.text.textContent = "";
  }

  /** Switch to `roomId`, restoring its draft. */
  open(roomId) {
    this.editing = null;
    this.stash = null;
    this.cancelContext();
    this.roomId = roomId;
    this.file.value = "";
    this.showChosen();
    this.say("");
    let saved = null;
    try {
      saved = JSON.parse(sessionStorage.getItem(draftKey(roomId)) || "null");
    } catch (_) {
      saved = null;
    }
    this.box.value = saved ? saved.text : "";
    this.key = saved ? saved.key : null;
    this.grow();
  }

  composed() {
    if (!this.key && (this.box.value.trim() || this.file.files.length)) this.key = newKey();
    this.save();
  }

  save() {
    if (!this.roomId || this.editing) return; // an edit is not a draft of the room
    if (this.key) {
      const draft = JSON.stringify({ text: this.box.value, key: this.key });
      sessionStorage.setItem(draftKey(this.roomId), draft);
    } else {
      sessionStorage.removeItem(draftKey(this.roomId));
    }
  }

  say(text, tone = "") {
    this.status.textContent = text;
    this.status.className = "composer-status" + (tone ? " " + tone : "");
  }

  async send() {
    if (this.busy || !this.roomId) return;
    if (this.editing) return this.sendEdit();
    const text = this.box.value;
    const chosen = this.file.files[0];
    if (!text.trim() && !chosen) {
      this.say("Type a message or choose a file first.", "bad");
      return;
    }
    if (chosen && this.replyTo) {
      this.say("A reply carries text only: cancel the reply to send the file on its own.", "bad");
      return;
    }
    if (!this.key) this.key = newKey();
    this.save();
    const roomId = this.roomId;
    const key = this.key;
    const answer = {};
    const replyTo = this.replyTo;
    if (this.replyTo) {
      answer.in_reply_to = this.replyTo.id;
      if (!this.context.kind.hidden && this.context.kind.value) {
        answer.reply_kind = this.context.kind.value;
      }
    }
    this.busy = true;
    this.button.setAttribute("aria-disabled", "true");
    this.say("Sending…");
    try {
      const path = `/v1/rooms/${encodeURIComponent(roomId)}`;
      let res;
      if (chosen) {
        const form = new FormData();
        form.append("file", chosen, chosen.name);
        if (text.trim()) form.append("text", text);
        res = await api.call("POST", path + "/media", { form, key });
      } else {
        res = await api.call("POST", path + "/messages", { json: { text, ...answer }, key });
      }
      this.posted(roomId, key, text, chosen, replyTo);
      const replayed = res.headers.get("Idempotency-Status") === "replayed";
      this.say(replayed ? "Posted (the hub had it already: not posted twice)." : "Posted.", "good");
      this.onPosted(res.body.event);
    } catch (err) {
      this.failed(err, key);
    } finally {
      this.busy = false;
      this.button.removeAttribute("aria-disabled");
    }
  }

  /** `text` (and `chosen`) went out with `key`: clear them from wherever they wait now —
   * the box, the draft put aside by an edit, or another room's stored draft — keeping what
   * was typed while the send was on its way. */
  posted(roomId, key, text, chosen, replyTo) {
    if (this.roomId !== roomId) {
      forgetDraft(roomId, key, text);
      return;
    }
    if (this.editing && this.stash && this.stash.key === key) {
      const rest = leftOver(this.stash.text, text);
      this.stash = { text: rest, key: rest ? newKey() : null };
      return;
    }
    if (this.key !== key) return;
    const rest = leftOver(this.box.value, text);
    this.box.value = rest;
    this.key = rest ? newKey() : null;
    if (!chosen || this.file.files[0] === chosen) {
      this.file.value = "";
      this.showChosen();
    }
    if (this.replyTo === replyTo) this.cancelContext();
    this.grow();
    this.save();
  }

  /** Post the box's text as an edit of `this.editing`; its key is kept until the hub answers. */
  async sendEdit() {
    const target = this.editing;
    const text = this.box.value;
    if (!text.trim()) {
      this.say("An edit needs text; to remove the message, use Delete.", "bad");
      return;
    }
    if (!this.key) this.key = newKey();
    const key = this.key;
    this.busy = true;
    this.button.setAttribute("aria-disabled", "true");
    this.say("Saving the edit…");
    try {
      const path = `/v1/rooms/${encodeURIComponent(target.room)}/events/${encodeURIComponent(target.id)}/edits`;
      await api.call("POST", path, { json: { text }, key });
      if (this.editing === target) {
        this.editing = null;
        this.key = null;
        const stash = this.stash || { text: "", key: null };
        this.stash = null;
        this.box.value = stash.text;
        this.key = stash.key;
        this.cancelContext();
        this.grow();
      }
      this.say("Edited.", "good");
    } catch (err) {
      if (err instanceof api.HubError && err.code === "event_redacted") {
        // Deleted elsewhere meanwhile: there is nothing left to edit, so leave the edit.
        if (this.editing === target) this.cancelContext();
        this.say("Not edited: the message was deleted meanwhile.", "bad");
        return;
      }
      this.failed(err, key);
    } finally {
      this.busy = false;
      this.button.removeAttribute("aria-disabled");
    }
  }

  failed(err, key) {
    if (err instanceof api.NetworkError) {
      this.say(
        "No answer from the hub, so it is not known whether the message was posted. " +
          "It is kept here: press Send again — it will not be posted twice.",
        "bad",
      );
      return;
    }
    if (!(err instanceof api.HubError)) {
      this.say(`Not sent: ${err.message}`, "bad");
      return;
    }
    const spent = () => {
      // The hub recorded this key: the next Send is a new message.
      if (this.key === key) {
        this.key = newKey();
        this.save();
      }
    };
    const lines = {
      channel_membership_required:
        "Not posted: you are not a participant of this room (403 channel_membership_required).",
      agent_removed:
        "Not posted: this agent was removed from the workspace (403 agent_removed).",
      member_removed:
        "Not posted: this member was removed from the workspace (403 member_removed).",
      room_archived:
        "Not posted: this room is archived and takes no new messages (409 room_archived).",
      payload_too_large: `Not posted: the file is too large for this hub${
        this.maxUpload ? ` (at most ${humanSize(this.maxUpload)})` : ""
      } (413 payload_too_large).`,
      idempotency_in_flight:
        "The hub is still handling the first try; press Send again in a moment.",
      storage_unavailable: "Not posted: the hub cannot store messages right now. Try again later.",
    };
    if (err.code === "idempotency_conflict") {
      spent();
      this.say(
        "An earlier version of this message was already posted. " +
          "Press Send again to post this text as a new message.",
        "bad",
      );
    } else if (err.code === "command_rejected") {
      spent();
      this.say(`Not posted: ${err.message} (422 command_rejected). Edit it and send again.`, "bad");
    } else if (err.status === 401) {
      this.say("Not posted: signed out.", "bad");
    } else {
      this.say(lines[err.code] || `Not posted: ${err.message} (${err.status} ${err.code}).`, "bad");
    }
  }
}
