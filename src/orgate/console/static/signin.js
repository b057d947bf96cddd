// Sign-in: POST the key once, the server answers with an HttpOnly session cookie.
"use strict";
document.querySelector("#signin button").disabled = false;
document.getElementById("signin").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = document.getElementById("key");
  const error = document.getElementById("signin-error");
  error.textContent = "";
  const response = await fetch("/console/api/session", {
    method: "POST",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify({key: input.value}),
    credentials: "same-origin",
  });
  input.value = "";
  if (response.ok) {
    window.location.reload();  // the server now answers /console with the console itself
    return;
  }
  const body = await response.json().catch(() => ({}));
  error.textContent = (body.error && body.error.message) || "Sign-in failed.";
});
