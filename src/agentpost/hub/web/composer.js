// The composer: a message gets its Idempotency-Key when it is composed and keeps it until
// the hub acknowledges it, so Send after a lost answer replays instead of posting twice.
// The draft (text and key) survives a reload in this tab's sessionStorage.

import * as api from "./api.js";
import { humanSize } from "./timeline.js";

function newKey() {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function draftKey(roomId) {
  return "agentpost.draft." + roomId;
}

export class Composer {
  /** form, box (textarea), file (input), status (line); onPosted(event) draws it. */
  constructor({ form, box, file, button, status, onPosted }) {
    Object.assign(this, { form, box, file, button, status, onPosted });
    this.roomId = null;
    this.key = null;
    this.busy = false;
    this.maxUpload = null;
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.send();
    });
    box.addEventListener("input", () => this.composed());
    file.addEventListener("change", () => this.composed());
    box.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
        ev.preventDefault();
        this.send();
      }
    });
  }

  /** Switch to `roomId`, restoring its draft. */
  open(roomId) {
    this.roomId = roomId;
    this.file.value = "";
    this.say("");
    let saved = null;
    try {
      saved = JSON.parse(sessionStorage.getItem(draftKey(roomId)) || "null");
    } catch (_) {
      saved = null;
    }
    this.box.value = saved ? saved.text : "";
    this.key = saved ? saved.key : null;
  }

  composed() {
    if (!this.key && (this.box.value.trim() || this.file.files.length)) this.key = newKey();
    this.save();
  }

  save() {
    if (!this.roomId) return;
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
    const text = this.box.value;
    const chosen = this.file.files[0];
    if (!text.trim() && !chosen) {
      this.say("Type a message or choose a file first.", "bad");
      return;
    }
    if (!this.key) this.key = newKey();
    this.save();
    const roomId = this.roomId;
    const key = this.key;
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
        res = await api.call("POST", path + "/messages", { json: { text }, key });
      }
      if (this.roomId === roomId && this.key === key) {
        this.key = null;
        this.box.value = "";
        this.file.value = "";
        this.save();
      }
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
