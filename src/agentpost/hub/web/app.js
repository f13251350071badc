// The page: sign in with a member token; the rooms you take part in, each with its unread
// messages (since you last read it) and your wake-ups marked apart; a room's timeline
// (pages of events, kept live by its stream, the newest in view while you are at the
// bottom); the composer; creating rooms and managing who takes part (docs/web.md).

import * as api from "./api.js";
import { Composer, newKey } from "./composer.js";
import { RoomExport } from "./export.js";
import { Inbox } from "./inbox.js";
import { Mentions } from "./mentions.js";
import { Presence } from "./presence.js";
import { Reservations } from "./reservations.js";
import { Search } from "./search.js";
import { RoomStream } from "./stream.js";
import { Timeline } from "./timeline.js";

const PAGE = 50;
const ROOM_KEY = "agentpost.room";
const DETAILED_KEY = "agentpost.detailed"; // localStorage: the density choice outlives the tab
const NOTIFY_KEY = "agentpost.notify";
const ROOMS_EVERY_MS = 20000; // other rooms' unread counts, also refreshed on every wake-up
const READ_SETTLE_MS = 400;
const NEAR_END_PX = 40;
const PHONE = window.matchMedia("(max-width: 640px)");
const $ = (id) => document.getElementById(id);

const state = {
  me: null,
  rooms: new Map(), // id → room as the hub listed it (with read_seq, unread)
  buttons: new Map(), // id → room button
  counts: new Map(), // id → wake-ups for you not yet seen
  roomId: null,
  room: null,
  stream: null,
  inbox: null,
  loadingOlder: false,
  stick: true, // the reader is at the bottom: new events keep the newest in view
  missed: 0, // events that arrived while the reader was scrolled up
  readSent: 0, // the last seq this page told the hub was read in the open room
  readTimer: null,
  roomsTimer: null,
  deleteKeys: new Map(), // event id → the Idempotency-Key of its redaction until answered
};

const timeline = new Timeline($("timeline"), (text) => roomStatus(text));
const presence = new Presence($("people"), timeline);
const mentions = new Mentions($("message"), $("mentions"), () =>
  presence.names().filter((name) => !state.me || name !== state.me.member.name),
);
const composer = new Composer({
  form: $("composer"),
  box: $("message"),
  file: $("file"),
  button: $("send"),
  status: $("composer-status"),
  chosen: $("file-chosen"),
  mentions,
  context: {
    box: $("context"),
    text: $("context-text"),
    kind: $("reply-kind"),
    kindLabel: $("reply-kind-label"),
    cancel: $("context-cancel"),
  },
  onPosted: (event) => {
    state.stick = true;
    if (event && event.room === state.roomId && timeline.add(event)) presence.eventsArrived();
    toBottom();
  },
});

const roomExport = new RoomExport({
  toggle: $("export"),
  panel: $("export-panel"),
  buttons: { md: $("export-md"), jsonl: $("export-jsonl") },
  status: $("export-status"),
});

const reservations = new Reservations({
  toggle: $("reserved"),
  panel: $("reserved-panel"),
  list: $("reserved-list"),
  status: $("reserved-status"),
});

function roomStatus(text, down = false) {
  $("room-status").textContent = text;
  $("room-status").classList.toggle("down", down);
}

function showSignIn(reason) {
  $("app").hidden = true;
  $("sign-out").hidden = true;
  $("nav-toggle").hidden = true;
  $("whoami").textContent = "";
  $("signin").hidden = false;
  $("signin-reason").textContent = reason || "";
  $("token").focus();
}

function closeRoom() {
  if (state.stream) state.stream.close();
  presence.close();
  clearTimeout(state.readTimer);
  Object.assign(state, { roomId: null, room: null, stream: null, missed: 0, readSent: 0 });
  timeline.clear();
  $("older").hidden = true;
  $("room-start").hidden = true;
  $("new-pill").hidden = true;
  $("composer").hidden = true;
  $("density").hidden = true;
  $("manage").hidden = true;
  showManage(false);
  roomExport.open(null);
  reservations.open(null);
  $("room-title").textContent = "Pick a room";
}

function signOut(reason) {
  api.clearToken();
  if (state.inbox) state.inbox.stop();
  clearInterval(state.roomsTimer);
  closeRoom();
  Object.assign(state, { me: null, inbox: null, roomsTimer: null });
  state.rooms.clear();
  state.buttons.clear();
  state.counts.clear();
  $("rooms").replaceChildren();
  roomsDrawn = "";
  search.clear();
  roomStatus("");
  drawTitle();
  sessionStorage.clear();
  showSignIn(reason);
}

async function signIn(event) {
  event.preventDefault();
  const value = $("token").value.trim();
  if (!value) {
    $("signin-reason").textContent = "Paste a member token first.";
    return;
  }
  api.setToken(value);
  $("token").value = "";
  await enter();
}

function refusedSignIn(err) {
  if (err instanceof api.HubError && err.status === 403) {
    signOut(`This token's member was removed: ${err.message}.`);
  } else if (err instanceof api.HubError) {
    showSignIn(`The hub refused: ${err.message}.`);
  } else {
    showSignIn("The hub could not be reached. Is it running?");
  }
}

async function enter() {
  let me;
  try {
    me = (await api.call("GET", "/v1/me")).body;
  } catch (err) {
    if (!(err instanceof api.HubError && err.status === 401)) refusedSignIn(err);
    return;
  }
  state.me = me;
  timeline.me = me.member.name;
  $("signin").hidden = true;
  $("app").hidden = false;
  $("sign-out").hidden = false;
  $("whoami").textContent = `${me.member.name} (${me.member.kind}) in ${me.workspace.name}`;
  phoneLayout();
  api
    .call("GET", "/v1/capabilities")
    .then((res) => {
      composer.maxUpload = res.body.max_upload_bytes;
    })
    .catch(() => {});
  state.inbox = new Inbox(
    me.inbox_cursor,
    (counts) => {
      state.counts = counts;
      loadRooms();
    },
    notifyWakeups,
  );
  state.roomsTimer = setInterval(loadRooms, ROOMS_EVERY_MS);
  await loadRooms();
  const wanted = sessionStorage.getItem(ROOM_KEY);
  if (wanted && state.rooms.has(wanted)) await openRoom(wanted);
  else if (PHONE.matches) showNav(true);
  else if (state.buttons.size) state.buttons.values().next().value.focus();
}

let roomsLoading = null;
let roomsAgain = false;
let roomsDrawn = "";

/** Ask the hub for the rooms; calls while one is on its way share one more ask after it. */
function loadRooms() {
  if (roomsLoading) {
    roomsAgain = true;
    return roomsLoading;
  }
  roomsLoading = (async () => {
    do {
      roomsAgain = false;
      await fetchRooms();
    } while (roomsAgain && state.me);
  })().finally(() => {
    roomsLoading = null;
  });
  return roomsLoading;
}

async function fetchRooms() {
  if (!state.me) return;
  let rooms;
  try {
    const path = `/v1/workspaces/${encodeURIComponent(state.me.workspace.name)}/rooms`;
    rooms = (await api.call("GET", path)).body.rooms;
  } catch (err) {
    if (!(err instanceof api.HubError && err.status === 401)) {
      roomStatus(`Rooms: ${err.message}`, err instanceof api.NetworkError);
    }
    return;
  }
  if (!state.me) return;
  rooms.sort((a, b) => a.name.localeCompare(b.name));
  state.rooms.clear();
  for (const room of rooms) state.rooms.set(room.id, room);
  const drawn = rooms.map((r) => `${r.id} ${r.name} ${r.archived}`).join("\n");
  if (drawn !== roomsDrawn) drawRooms(rooms, drawn); // the same list: only counts change
  if (state.roomId && !state.rooms.has(state.roomId)) leftRoom();
  drawCounts();
}

function drawRooms(rooms, drawn) {
  roomsDrawn = drawn;
  const focused = document.activeElement && document.activeElement.dataset.roomId;
  const list = $("rooms");
  list.replaceChildren();
  state.buttons.clear();
  for (const room of rooms) {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "room-button";
    button.dataset.roomId = room.id;
    button.textContent = room.name;
    const unread = document.createElement("span");
    unread.className = "unread";
    unread.id = "unread-" + room.id;
    unread.hidden = true;
    const mine = document.createElement("span");
    mine.className = "unread mine";
    mine.id = "wakeups-" + room.id;
    mine.hidden = true;
    button.setAttribute("aria-describedby", `${unread.id} ${mine.id}`);
    if (room.id === state.roomId) button.setAttribute("aria-current", "true");
    button.addEventListener("click", () => openRoom(room.id));
    item.append(button, unread, mine);
    if (room.archived) {
      const tag = document.createElement("span");
      tag.className = "tag";
      tag.textContent = "archived";
      item.append(tag);
    }
    list.append(item);
    state.buttons.set(room.id, button);
    if (focused === room.id) button.focus();
  }
  $("rooms-empty").hidden = rooms.length > 0;
}

/** Unread messages per room (since you last read it) and, apart, wake-ups for you. */
function drawCounts() {
  for (const [roomId, room] of state.rooms) {
    const unread = $("unread-" + roomId);
    const mine = $("wakeups-" + roomId);
    if (!unread || !mine) continue;
    const n = roomId === state.roomId && reading() ? 0 : room.unread || 0;
    unread.hidden = n === 0;
    unread.textContent = n ? `${n} unread` : "";
    const w = state.counts.get(roomId) || 0;
    mine.hidden = w === 0;
    mine.textContent = w ? `${w} for you` : "";
  }
  drawTitle();
}

function drawTitle() {
  let total = 0;
  for (const [roomId, room] of state.rooms) {
    if (!(roomId === state.roomId && reading())) total += room.unread || 0;
  }
  const where = state.room ? ` · ${state.room.name}` : "";
  document.title = (total ? `(${total}) ` : "") + "agentpost" + where;
}

/** The open room is being read: the tab is visible and its newest message is in view. */
function reading() {
  return state.roomId !== null && state.stick && document.visibilityState === "visible";
}

function nearEnd() {
  const box = $("timeline-box");
  return box.scrollHeight - box.scrollTop - box.clientHeight < NEAR_END_PX;
}

function toBottom() {
  const box = $("timeline-box");
  box.scrollTop = box.scrollHeight;
  state.missed = 0;
  $("new-pill").hidden = true;
  markRead();
}

/** Tell the hub the open room is read up to its newest drawn event, once things settle. */
function markRead() {
  if (!reading()) return;
  const room = state.rooms.get(state.roomId);
  if (room && room.unread) {
    room.unread = 0;
    drawCounts();
  }
  clearTimeout(state.readTimer);
  state.readTimer = setTimeout(async () => {
    const roomId = state.roomId;
    const seq = timeline.newest;
    if (!roomId || !seq || seq <= state.readSent || !reading()) return;
    state.readSent = seq;
    try {
      const path = `/v1/rooms/${encodeURIComponent(roomId)}/read`;
      await api.call("POST", path, { json: { seq } });
    } catch {
      if (state.roomId === roomId && state.readSent === seq) state.readSent = 0; // asked again later
    }
  }, READ_SETTLE_MS);
}

async function fetchEvents(roomId, after, limit) {
  const path = `/v1/rooms/${encodeURIComponent(roomId)}/events?after=${after}&limit=${limit}`;
  return (await api.call("GET", path)).body.events;
}

async function openRoom(roomId) {
  closeRoom();
  state.roomId = roomId;
  state.stick = true;
  sessionStorage.setItem(ROOM_KEY, roomId);
  for (const [id, button] of state.buttons) {
    if (id === roomId) button.setAttribute("aria-current", "true");
    else button.removeAttribute("aria-current");
  }
  if (PHONE.matches) showNav(false);
  const known = state.rooms.get(roomId);
  $("room-title").textContent = known ? known.name : roomId;
  $("composer").hidden = false;
  $("density").hidden = false;
  $("manage").hidden = false;
  composer.open(roomId);
  roomStatus("Loading…");
  let room;
  let events;
  try {
    room = (await api.call("GET", `/v1/rooms/${encodeURIComponent(roomId)}`)).body.room;
    events = await fetchEvents(roomId, Math.max(0, room.last_seq - PAGE), PAGE);
  } catch (err) {
    if (state.roomId !== roomId) return;
    if (err instanceof api.HubError && err.status === 403) leftRoom();
    else roomStatus(`This room cannot be read: ${err.message}`, err instanceof api.NetworkError);
    return;
  }
  if (state.roomId !== roomId) return;
  showRoom(room);
  timeline.maxDepth = room.max_delegation_depth;
  for (const event of events) timeline.add(event);
  drawStart();
  toBottom();
  if (state.inbox) state.inbox.show(roomId);
  presence.open(room);
  const after = Math.max(room.last_seq, timeline.newest || 0);
  state.stream = new RoomStream(roomId, after, onLive, onStreamState, (members) => {
    presence.show(members);
    drawManage();
  });
}

function showRoom(room) {
  state.room = room;
  if (!roomExport.room || roomExport.room.id !== room.id) roomExport.open(room);
  if (reservations.workspace !== room.workspace) reservations.open(room.workspace);
  $("room-title").textContent = room.archived ? `${room.name} (archived)` : room.name;
  $("archive").textContent = room.archived ? "Unarchive room" : "Archive room";
  drawManage();
  drawTitle();
}

/** "This is the start of #room" once the first page is drawn. */
function drawStart() {
  const first = !(timeline.oldest > 1);
  $("older").hidden = first;
  $("room-start").hidden = !first || !state.room;
  if (state.room) {
    $("room-start").textContent = timeline.shown
      ? `This is the start of #${state.room.name}.`
      : `This is the start of #${state.room.name}. No messages yet: say hello.`;
  }
}

/** The open room is no longer ours (removed, or it left the list): say so, close it. */
function leftRoom() {
  const name = state.room ? state.room.name : "this room";
  closeRoom();
  sessionStorage.removeItem(ROOM_KEY);
  roomStatus(`You are no longer a participant of ${name}.`);
  loadRooms();
}

// The latest read asked per event: an older answer never draws over a newer one.
const refreshing = new Map();

/** Draw `id` again as the hub serves it now: an edit, reaction or redaction named it. */
async function refreshEvent(roomId, id) {
  const ask = (refreshing.get(id) || 0) + 1;
  refreshing.set(id, ask);
  try {
    const event = (await api.call("GET", `/v1/events/${encodeURIComponent(id)}`)).body.event;
    if (state.roomId === roomId && refreshing.get(id) === ask) timeline.replace(event);
  } catch (err) {
    if (state.roomId === roomId) roomStatus(`Could not update a message: ${err.message}`);
  } finally {
    if (refreshing.get(id) === ask) refreshing.delete(id);
  }
}

function onLive(event) {
  if (event.room !== state.roomId) return;
  if (!timeline.add(event)) return;
  reservations.eventArrived(event);
  if (event.relates_to && timeline.has(event.relates_to)) {
    refreshEvent(event.room, event.relates_to);
  }
  drawStart();
  if (!reading() && !event.relates_to && event.sender !== state.me.member.name) {
    // Counted as the hub counts it, at once: the tab title tells a hidden tab now, not at
    // the next list of rooms (whose count may hold this event already: its last_seq says).
    const room = state.rooms.get(event.room);
    if (room && event.seq > (room.last_seq || 0)) {
      room.unread = (room.unread || 0) + 1;
      room.last_seq = event.seq;
      drawCounts();
    }
  }
  if (state.stick) {
    toBottom();
  } else if (!event.relates_to) {
    state.missed += 1;
    const pill = $("new-pill");
    pill.textContent = state.missed === 1 ? "1 new message below" : `${state.missed} new messages below`;
    pill.hidden = false;
  }
  presence.eventsArrived();
}

function onStreamState(kind, err) {
  const words = {
    connecting: "Connecting…",
    live: "Live",
    reconnecting: "Hub unreachable; reconnecting…",
  };
  if (kind === "stopped") {
    if (err instanceof api.HubError && (err.status === 403 || err.status === 404)) {
      leftRoom();
      return;
    }
    roomStatus(err ? `Not live: ${err.message}` : "Not live", true);
  } else {
    roomStatus(words[kind], kind === "reconnecting");
  }
  if (kind !== "live" && kind !== "connecting") presence.unknown();
  $("timeline-box").setAttribute("aria-busy", kind === "live" ? "false" : "true");
}

async function loadOlder() {
  const roomId = state.roomId;
  const oldest = timeline.oldest;
  if (state.loadingOlder || !roomId || !(oldest > 1)) return false;
  state.loadingOlder = true;
  const box = $("timeline-box");
  try {
    const after = Math.max(0, oldest - 1 - PAGE);
    const events = await fetchEvents(roomId, after, oldest - 1 - after);
    if (state.roomId !== roomId) return false;
    const before = box.scrollHeight;
    for (const event of events) timeline.add(event);
    box.scrollTop += box.scrollHeight - before; // what was in view stays in view
    drawStart();
    return events.length > 0;
  } catch (err) {
    roomStatus(`Older messages: ${err.message}`);
    return false;
  } finally {
    state.loadingOlder = false;
  }
}

/** Open `roomId` and bring `eventId` into view, paging back to it if it is older. */
async function openAt(roomId, eventId) {
  if (PHONE.matches) showNav(false);
  if (state.roomId !== roomId || !timeline.focusEvent(eventId)) {
    if (state.roomId !== roomId) await openRoom(roomId);
    while (!timeline.focusEvent(eventId) && state.roomId === roomId) {
      if (!(await loadOlder())) {
        roomStatus("That message is no longer in this room's timeline.");
        return;
      }
    }
  }
  state.stick = nearEnd();
}

const search = new Search({
  form: $("search"),
  box: $("search-box"),
  results: $("search-results"),
  status: $("search-status"),
  more: $("search-more"),
  clearButton: $("search-clear"),
  onOpen: openAt,
  roomName: (id) => (state.rooms.get(id) || { name: id }).name,
});

timeline.onAnswerClick = async (id) => {
  const roomId = state.roomId;
  while (!timeline.focusEvent(id) && state.roomId === roomId) {
    if (!(await loadOlder())) {
      roomStatus("The message it answers is not in this room's timeline.");
      return;
    }
  }
  state.stick = nearEnd();
};

// Reply, edit, delete on a message (timeline.js draws the buttons).
timeline.onAction = (action, event) => {
  if (action === "reply") {
    const md = event.metadata || {};
    const toMe = Array.isArray(md.delegated_to) && md.delegated_to.includes(state.me.member.name);
    composer.replyToEvent(event, toMe);
  } else if (action === "edit") {
    composer.editEvent(event);
  } else if (action === "delete") {
    deleteEvent(event);
  }
};

async function deleteEvent(event) {
  if (!window.confirm(`Delete your message #${event.seq}? Everyone will see "Message deleted".`)) {
    return;
  }
  let key = state.deleteKeys.get(event.id);
  if (!key) {
    key = newKey();
    state.deleteKeys.set(event.id, key);
  }
  composer.say("Deleting…");
  try {
    const path = `/v1/rooms/${encodeURIComponent(event.room)}/events/${encodeURIComponent(event.id)}/redactions`;
    await api.call("POST", path, { json: {}, key });
    state.deleteKeys.delete(event.id);
    composer.say("Deleted.", "good");
  } catch (err) {
    if (err instanceof api.NetworkError) {
      composer.say(
        "No answer from the hub, so it is not known whether the message was deleted. " +
          "Press Delete again: it is done once.",
        "bad",
      );
    } else if (err.code === "event_redacted") {
      // Deleted meanwhile (another tab, or a first try whose answer was lost): done.
      state.deleteKeys.delete(event.id);
      composer.say("Deleted (it was deleted already).", "good");
    } else {
      state.deleteKeys.delete(event.id);
      composer.say(`Not deleted: ${err.message} (${err.status} ${err.code}).`, "bad");
    }
  }
}

// Scrolling: at the bottom the newest stays in view (also when lines above grow, e.g. a
// delivery line or an image arrives); scrolled up, new messages raise a pill instead.
$("timeline-box").addEventListener("scroll", () => {
  const box = $("timeline-box");
  state.stick = nearEnd();
  if (state.stick) {
    state.missed = 0;
    $("new-pill").hidden = true;
    markRead();
  }
  if (box.scrollTop < NEAR_END_PX) loadOlder();
});
const keepBottom = new ResizeObserver(() => {
  if (state.roomId && state.stick) $("timeline-box").scrollTop = $("timeline-box").scrollHeight;
});
keepBottom.observe($("timeline"));
keepBottom.observe($("timeline-box"));
$("new-pill").addEventListener("click", () => {
  state.stick = true;
  toBottom();
  $("message").focus();
});
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") {
    markRead();
    loadRooms();
  }
  drawCounts();
});

// Density: compact unless the person asked for delivery details (remembered).
function setDetailed(on) {
  $("timeline").classList.toggle("detailed", on);
  $("density").setAttribute("aria-pressed", String(on));
  localStorage.setItem(DETAILED_KEY, on ? "1" : "0");
}
$("density").addEventListener("click", () => {
  setDetailed($("density").getAttribute("aria-pressed") !== "true");
});
setDetailed(localStorage.getItem(DETAILED_KEY) === "1");

// Phones: rooms and search behind the "Rooms" button.
function showNav(open) {
  $("app").classList.toggle("nav-open", open);
  $("nav-toggle").setAttribute("aria-expanded", String(open));
  if (open) $("search-box").focus();
}
function phoneLayout() {
  $("nav-toggle").hidden = !PHONE.matches || $("app").hidden;
  if (!PHONE.matches) showNav(false);
}
PHONE.addEventListener("change", phoneLayout);
$("nav-toggle").addEventListener("click", () => {
  showNav($("nav-toggle").getAttribute("aria-expanded") !== "true");
});
document.addEventListener("keydown", (ev) => {
  if (ev.key === "Escape" && $("app").classList.contains("nav-open") && state.roomId) {
    showNav(false);
    $("nav-toggle").focus();
  }
});

// Rooms: create one, and manage who takes part in the open one.
$("new-room").addEventListener("click", () => {
  const open = $("new-room-form").hidden;
  $("new-room-form").hidden = !open;
  $("new-room").setAttribute("aria-expanded", String(open));
  if (open) {
    loadMemberNames();
    $("new-room-name").focus();
  }
});

function names(text) {
  return text
    .split(/[\s,]+/)
    .map((n) => n.replace(/^@/, ""))
    .filter(Boolean);
}

$("new-room-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const say = (text) => ($("new-room-status").textContent = text);
  const name = $("new-room-name").value.trim();
  if (!name) {
    say("Give the room a name first.");
    $("new-room-name").focus();
    return;
  }
  const participants = names($("new-room-people").value);
  say("Creating…");
  let room;
  try {
    const path = `/v1/workspaces/${encodeURIComponent(state.me.workspace.name)}/rooms`;
    room = (await api.call("POST", path, { json: { name, participants } })).body.room;
  } catch (err) {
    say(`Not created: ${refusal(err)}.`);
    return;
  }
  say(`Created #${room.name}.`);
  $("new-room-name").value = "";
  $("new-room-people").value = "";
  $("new-room-form").hidden = true;
  $("new-room").setAttribute("aria-expanded", "false");
  await loadRooms();
  await openRoom(room.id);
  $("message").focus();
});

/** A refusal as the panels say it: the hub's words, status and code (none: no answer). */
function refusal(err) {
  const why = err instanceof api.HubError ? `${err.status} ${err.code}` : "no answer";
  return `${err.message} (${why})`;
}

async function loadMemberNames() {
  if (!state.me) return;
  try {
    const path = `/v1/workspaces/${encodeURIComponent(state.me.workspace.name)}/members`;
    const members = (await api.call("GET", path)).body.members;
    const options = members
      .filter((m) => m.status === "active" && m.name !== state.me.member.name)
      .map((m) => {
        const option = document.createElement("option");
        option.value = m.name;
        option.label = `${m.name} (${m.kind})`;
        return option;
      });
    $("member-names").replaceChildren(...options);
  } catch {
    // Names are a convenience: typing them works without the list.
  }
}

function showManage(open) {
  $("manage-panel").hidden = !open;
  $("manage").setAttribute("aria-expanded", String(open));
  $("manage-status").textContent = "";
}

$("manage").addEventListener("click", () => {
  const open = $("manage-panel").hidden;
  showManage(open);
  if (open) {
    loadMemberNames();
    drawManage();
    $("add-person-name").focus();
  }
});

/** The panel's list: the room's active participants, each with a Remove button. */
function drawManage() {
  if (!state.room || $("manage-panel").hidden) return;
  const listed = presence.names().length ? presence.names() : state.room.participants || [];
  const me = state.me.member.name;
  const items = [...listed].sort().map((name) => {
    const item = document.createElement("li");
    item.append(document.createTextNode(name === me ? `${name} (you)` : name));
    const button = document.createElement("button");
    button.type = "button";
    button.className = "quiet";
    button.textContent = name === me ? "Leave" : "Remove";
    button.setAttribute(
      "aria-label",
      name === me ? "Leave this room" : `Remove ${name} from the room`,
    );
    button.addEventListener("click", () => changeParticipant(name, false));
    item.append(button);
    return item;
  });
  $("manage-people").replaceChildren(...items);
}

async function changeParticipant(name, adding) {
  const roomId = state.roomId;
  const say = (text) => ($("manage-status").textContent = text);
  if (!adding && name === state.me.member.name && !window.confirm("Leave this room?")) return;
  say(adding ? `Adding ${name}…` : `Removing ${name}…`);
  try {
    const path = `/v1/rooms/${encodeURIComponent(roomId)}/participants/${encodeURIComponent(name)}`;
    const room = (await api.call(adding ? "PUT" : "DELETE", path)).body.room;
    if (state.roomId === roomId) {
      showRoom(room);
      say(adding ? `${name} takes part now.` : `${name} no longer takes part.`);
    }
  } catch (err) {
    say(`Not changed: ${refusal(err)}.`);
  }
  if (!adding && name === state.me.member.name) leftRoom();
}

$("add-person").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const wanted = names($("add-person-name").value);
  if (!wanted.length) {
    $("manage-status").textContent = "Type a member's name first.";
    return;
  }
  $("add-person-name").value = "";
  for (const name of wanted) changeParticipant(name, true);
});

$("archive").addEventListener("click", async () => {
  const roomId = state.roomId;
  const archiving = !(state.room && state.room.archived);
  try {
    const path = `/v1/rooms/${encodeURIComponent(roomId)}/${archiving ? "archive" : "unarchive"}`;
    const room = (await api.call("POST", path)).body.room;
    if (state.roomId === roomId) {
      showRoom(room);
      $("manage-status").textContent = archiving
        ? "Archived: the room takes no new messages."
        : "Unarchived.";
    }
    loadRooms();
  } catch (err) {
    $("manage-status").textContent = `Not changed: ${err.message}`;
  }
});

// Browser notifications for your wake-ups, when asked for (remembered per browser).
function notifyOn() {
  return (
    "Notification" in window &&
    Notification.permission === "granted" &&
    localStorage.getItem(NOTIFY_KEY) === "1"
  );
}

function drawNotify() {
  $("notify").setAttribute("aria-pressed", String(notifyOn()));
}

$("notify").addEventListener("click", async () => {
  if (!("Notification" in window)) {
    $("search-status").textContent = "This browser cannot show notifications.";
    return;
  }
  if (notifyOn()) {
    localStorage.setItem(NOTIFY_KEY, "0");
  } else {
    const answer = await Notification.requestPermission();
    if (answer === "granted") localStorage.setItem(NOTIFY_KEY, "1");
    else $("search-status").textContent = "Notifications are blocked for this page.";
  }
  drawNotify();
});
drawNotify();

function notifyWakeups(items) {
  if (!notifyOn()) return;
  for (const item of items) {
    const event = item.event;
    if (event.room === state.roomId && reading()) continue; // on screen already
    const room = state.rooms.get(event.room);
    const title = `${event.sender} in ${room ? "#" + room.name : "a room"}`;
    try {
      new Notification(title, { body: (event.text || "").slice(0, 200), tag: event.id });
    } catch {
      // Some browsers allow notifications from a service worker only: the counts still show.
    }
  }
}

// A token refused at sign-in (or on a reload) was never signed in: say it was not accepted,
// not "Signed out".
api.onUnauthorized((err) =>
  signOut(
    state.me
      ? `Signed out: ${err.message}.`
      : `That token was not accepted by this hub (${err.message}). Check that it is whole, or ask for a new one.`,
  ),
);
$("signin-form").addEventListener("submit", signIn);
$("sign-out").addEventListener("click", () => signOut("You signed out."));
$("older").addEventListener("click", loadOlder);

if (api.token()) enter();
else showSignIn("");
