// The review page's own script (served by the bot, nothing from elsewhere): reads the launch data Telegram put in the
// URL fragment, sends it with every request, shows what the server answers, applies Telegram's theme.
(function () {
  "use strict";
  var base = document.body.getAttribute("data-base") || "";
  var fragment = new URLSearchParams(location.hash.slice(1));
  var initData = fragment.get("tgWebAppData") || "";
  var main = document.getElementById("review");

  function applyTheme() {
    var raw = fragment.get("tgWebAppThemeParams");
    var theme = {};
    try { theme = raw ? JSON.parse(raw) : {}; } catch (e) { theme = {}; }
    var names = { bg_color: "--bg", text_color: "--text", hint_color: "--hint", link_color: "--link",
                  button_color: "--button", button_text_color: "--button-text", secondary_bg_color: "--secondary-bg" };
    var dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
    if (/^#[0-9a-fA-F]{6}$/.test(theme.bg_color || "")) {
      var n = parseInt(theme.bg_color.slice(1), 16);
      dark = (0.299 * (n >> 16) + 0.587 * ((n >> 8) & 255) + 0.114 * (n & 255)) < 128;
    }
    document.body.className = dark ? "dark" : "light";
    Object.keys(names).forEach(function (key) {
      if (/^#[0-9a-fA-F]{3,8}$/.test(theme[key] || "")) { document.body.style.setProperty(names[key], theme[key]); }
    });
  }

  function taskId() {
    var m = location.pathname.match(/\/task\/(\d+)\/?$/);
    if (m) { return m[1]; }
    var start = new URLSearchParams(initData).get("start_param") || "";
    m = start.match(/^task_(\d+)$/);
    return m ? m[1] : "";
  }

  function call(method, path) {
    return fetch(base + path, { method: method, headers: { "Authorization": "tma " + initData }, credentials: "omit" })
      .then(function (r) { return r.text().then(function (body) { return { ok: r.ok, status: r.status, body: body }; }); });
  }

  function refuse(text) {
    main.innerHTML = "";
    var p = document.createElement("p");
    p.className = "status refused";
    p.id = "status";
    p.textContent = text;
    document.body.setAttribute("data-loaded", "refused");
    main.appendChild(p);
  }

  var id = taskId();
  // side by side where the screen is wide (a tablet, a desktop client), unified on a phone
  var layout = window.innerWidth >= 900 ? "split" : "unified";

  function loadPictures() {
    Array.prototype.forEach.call(document.querySelectorAll("img[data-picture]"), function (img) {
      fetch(base + "/api/task/" + id + "/picture/" + img.getAttribute("data-picture"),
            { headers: { "Authorization": "tma " + initData }, credentials: "omit" })
        .then(function (r) { return r.ok ? r.blob() : null; })
        .then(function (blob) { if (blob) { img.src = URL.createObjectURL(blob); } });
    });
  }

  function wire() {
    Array.prototype.forEach.call(document.querySelectorAll("button.act"), function (button) {
      button.addEventListener("click", function () { act(button); });
    });
    wirePager();
    loadPictures();
  }

  function wirePager() {
    Array.prototype.forEach.call(document.querySelectorAll("button.page"), function (button) {
      button.addEventListener("click", function () {
        call("GET", "/api/task/" + id + "/diff?layout=" + layout + "&page=" + button.getAttribute("data-page")).then(function (r) {
          if (!r.ok) { refuse(r.body); return; }
          document.getElementById("diff").innerHTML = r.body;
          wirePager();
          window.scrollTo(0, document.getElementById("diff").offsetTop);
        });
      });
    });
  }

  function act(button) {
    var said = document.getElementById("said");
    var buttons = document.querySelectorAll("button.act");
    Array.prototype.forEach.call(buttons, function (b) { b.disabled = true; });
    said.textContent = "…";
    call("POST", "/api/task/" + id + "/" + button.getAttribute("data-action")).then(function (r) {
      var text = r.body;
      try { text = JSON.parse(r.body).text; } catch (e) { /* a plain refusal */ }
      said.textContent = text;
      Array.prototype.forEach.call(buttons, function (b) { b.disabled = false; });
    });
  }

  applyTheme();
  if (!initData) { refuse("Open this page from the bot's Review button in Telegram."); return; }
  if (!id) { refuse("This link names no task."); return; }
  call("GET", "/api/task/" + id + "?layout=" + layout).then(function (r) {
    if (!r.ok) { refuse(r.body); return; }
    main.innerHTML = r.body;
    wire();
    document.body.setAttribute("data-loaded", "1");
  }, function () { refuse("The bot could not be reached."); });
})();
