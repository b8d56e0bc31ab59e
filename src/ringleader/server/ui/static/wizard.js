// The new-workload wizard: the form works without this script; it adds a stepper
// (one step at a time, CONTINUE/BACK, CREATE on the last: the summary), the name
// check as you type, the summary from the server, and shows only
// the fields that apply (the GPU request's kind, the master's setup, the chosen
// project's assets). Every control stays a real, keyboard-operable form control.
"use strict";

(() => {
  const form = document.getElementById("wizard");
  if (!form) return;
  const $ = (selector, root = form) => root.querySelector(selector);
  const $$ = (selector, root = form) => Array.from(root.querySelectorAll(selector));
  const project = $("#f-project");

  // ----- which fields apply --------------------------------------------------------
  function showGpuKind() {
    for (const prefix of ["", "master_", "new_compute_"]) {
      const kind = form.elements[prefix + "gpu_request_type"]?.value || "portion";
      for (const input of $$(`[name="${prefix}gpu_portion"], [name="${prefix}gpu_memory"]`)) {
        const field = input.closest(".field");
        const mine = input.dataset.gpuKind === kind;
        // Keep a field with something typed in it visible: the server says what is wrong.
        field.hidden = !mine && !input.value && !input.getAttribute("aria-invalid");
      }
    }
  }

  function showMaster() {
    const workersOnly = form.elements.topology.value === "workers";
    const differs = $("#f-master_differs");
    differs.disabled = workersOnly;
    $("#master-fields").hidden = workersOnly || !differs.checked;
  }

  function showProjectAssets() {
    const chosen = project.value;
    for (const select of $$("select.asset-select")) {
      for (const group of $$("optgroup", select)) {
        const mine = !group.dataset.project || group.dataset.project === chosen;
        group.hidden = !mine;
        for (const option of $$("option", group)) option.disabled = !mine;
      }
      if (select.selectedOptions[0]?.disabled) select.value = "";
    }
  }

  // ----- the name, checked as you type ----------------------------------------------
  const name = $("#f-name");
  const status = $("#name-status");
  let timer = null;
  let asked = 0;
  async function checkName() {
    const mine = ++asked;
    if (!name.value.trim()) { status.textContent = ""; return; }
    const query = new URLSearchParams({ project: project.value, name: name.value });
    try {
      const response = await ringleader.request(`/workloads/new/name-check?${query}`);
      if (!response.ok || mine !== asked) return;
      const answer = await response.json();
      status.textContent = (answer.available ? "✓ " : "✗ ") + answer.message;
      status.className = "name-status " + (answer.available ? "name-free" : "name-taken");
    } catch (err) { /* the server checks again on CREATE */ }
  }
  const checkSoon = () => { clearTimeout(timer); timer = setTimeout(checkName, 250); };

  // ----- the stepper ----------------------------------------------------------------
  const steps = $$("fieldset.step");
  const nav = document.createElement("nav");
  nav.className = "stepper";
  nav.setAttribute("aria-label", "Steps");
  const list = document.createElement("ol");
  nav.append(list);
  const tabs = steps.map((step, index) => {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "link";
    button.textContent = `${index + 1}. ${step.dataset.title}`;
    button.addEventListener("click", () => show(index, true));
    item.append(button);
    list.append(item);
    if (step.querySelector('[aria-invalid="true"]')) item.classList.add("has-error");
    return button;
  });
  form.before(nav);

  steps.forEach((step, index) => {
    const buttons = document.createElement("div");
    buttons.className = "step-buttons";
    if (index > 0) {
      const back = document.createElement("button");
      back.type = "button";
      back.textContent = "Back";
      back.addEventListener("click", () => show(index - 1, true));
      buttons.append(back);
    }
    if (index < steps.length - 1) {
      const next = document.createElement("button");
      next.type = "button";
      next.className = "primary continue";
      next.textContent = "Continue";
      next.addEventListener("click", () => show(index + 1, true));
      buttons.append(next);
    }
    step.append(buttons);
  });

  // ----- the summary: what CREATE will make, from the server (it applies the assets) --------
  const recap = document.getElementById("recap");
  const create = document.getElementById("create");
  let recapAsked = 0;
  async function refreshSummary() {
    const mine = ++recapAsked;
    recap.setAttribute("aria-busy", "true");
    try {
      const body = new URLSearchParams(new FormData(form));
      const response = await ringleader.request("/workloads/new/summary", { method: "POST", body });
      if (response.ok && mine === recapAsked) recap.innerHTML = await response.text(); // escaped by its template
    } catch (err) { /* the summary shown stays; CREATE checks everything again */ }
    finally { if (mine === recapAsked) recap.removeAttribute("aria-busy"); }
  }

  // CREATE only on the last step (the summary), as Run:ai's wizard: the steps before
  // end with CONTINUE, so nothing is created from a step whose successors were unseen.
  function show(index, focus) {
    const last = index === steps.length - 1;
    create.hidden = !last;
    if (last) refreshSummary();
    steps.forEach((step, i) => { step.hidden = i !== index; });
    tabs.forEach((tab, i) => {
      if (i === index) tab.setAttribute("aria-current", "step");
      else tab.removeAttribute("aria-current");
    });
    if (focus) {
      const first = steps[index].querySelector(
        "input:not([type=hidden]):not([disabled]), select, textarea");
      (first || steps[index]).focus();
    }
  }

  function stepOf(element) {
    return steps.findIndex((step) => step.contains(element));
  }

  // A link of the error summary opens the step of its field.
  for (const link of $$(".error-summary a", document)) {
    link.addEventListener("click", (event) => {
      const target = document.querySelector(link.getAttribute("href"));
      if (!target) return;
      event.preventDefault();
      show(stepOf(target), false);
      target.focus();
    });
  }

  // Enter in a "new asset" name presses that panel's own button, not CREATE.
  for (const panel of $$("[data-default-button]")) {
    panel.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && event.target.tagName === "INPUT") {
        event.preventDefault();
        document.getElementById(panel.dataset.defaultButton).click();
      }
    });
  }

  // Enter in a field of a step that is not the last is CONTINUE: creating at once would
  // skip the steps not yet seen. On the last step it creates (the form's first button).
  // A textarea keeps its Enter (a new line); a button is pressed as itself.
  form.addEventListener("keydown", (event) => {
    const target = event.target;
    if (event.key !== "Enter" || event.defaultPrevented || target.tagName !== "INPUT") return;
    if (["button", "submit", "reset"].includes(target.type)) return;
    const index = stepOf(target);
    if (index < 0 || index >= steps.length - 1) return;
    event.preventDefault();
    show(index + 1, true);
  });

  const invalid = $('[aria-invalid="true"]');
  let start = 0;
  if (invalid) start = stepOf(invalid);
  else if (form.dataset.start) start = steps.findIndex((step) => step.id === form.dataset.start);
  show(Math.max(0, start), false);
  if (document.getElementById("error-summary")) document.getElementById("error-summary").focus();

  form.addEventListener("change", (event) => {
    if (event.target.classList.contains("gpu-kind")) showGpuKind();
    if (event.target.name === "topology" || event.target.name === "master_differs") showMaster();
    if (event.target === project) { showProjectAssets(); checkName(); }
  });
  name.addEventListener("input", checkSoon);
  showGpuKind();
  showMaster();
  showProjectAssets();
  // A name the server refused already says why; the check speaks again once it changes.
  if (name.value && name.getAttribute("aria-invalid") !== "true") checkName();
})();
