// The Tokens page lists every app's sign-ins, where each came from, and the unused sign-in
// links; revoking a link voids it, and signing a sign-in out ends the sign-ins made from its
// links and voids the links it kept, in a real Chromium tab on the real relay.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRelay, launchBrowser, openPage, api } from './harness.mjs';

const APP = 'https://a.example';

let relay;
let browser;

before(async () => {
  relay = await startRelay({ args: ['--app-origin', APP] });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await relay?.stop();
});

// A link `token` makes for `app`: its one-time code.
async function newLink(token, app) {
  const made = await api(relay.base, 'POST', '/v1/auth/signin-links', { token, body: app ? { app_origin: app } : undefined });
  assert.equal(made.status, 200, JSON.stringify(made.body));
  return made.body.link.match(/#signin=([A-Za-z0-9_-]+)/)[1];
}

async function signIn(code) {
  return await api(relay.base, 'POST', '/v1/auth/signin', { body: { code } });
}

// A sign-in made from a link `token` makes for `app`: its token.
async function child(token, app) {
  const signed = await signIn(await newLink(token, app));
  assert.equal(signed.status, 200, JSON.stringify(signed.body));
  return signed.body.token;
}

async function ownId(token) {
  const { body } = await api(relay.base, 'GET', '/v1/owner-tokens', { token });
  return body.tokens.find((t) => t.current).id;
}

async function meStatus(token) {
  return (await api(relay.base, 'GET', '/v1/me', { token })).status;
}

test('the Tokens page lists unused links with their app and maker, revokes one, and a signed-out sign-in takes what it made with it', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  // The first start's link, so no unused link is left but those the test makes.
  const page = await openPage(context, relay.signinUrl);
  await page.waitForSelector('#nav:not([hidden])');
  // Another device of the person's signs a host app in; that app's sign-in signs in a device
  // of its own and keeps a link in reserve.
  const other = await relay.ownerToken();
  const app = await child(other, APP);
  const appId = await ownId(app);
  const fromApp = await child(app, APP);
  const reserve = await newLink(app, APP);

  await page.click('nav a[href="#/tokens"]');
  await page.waitForSelector('main h2:text-is("Tokens")');
  const appRow = `#devices tr[data-id="${appId}"]`;
  assert.match(await page.textContent(appRow), /https:\/\/a\.example/);
  assert.match(await page.textContent(appRow), /a link of the sign-in of/);
  const links = await page.$$eval('#links tbody tr', (rows) => rows.map((r) => r.textContent));
  assert.equal(links.length, 1, links.join('\n'));
  assert.match(links[0], /https:\/\/a\.example/);
  assert.match(links[0], /The sign-in of .*\(https:\/\/a\.example\)/);

  // Revoking the link voids it.
  await page.click('#links tbody tr button:text-is("Revoke")');
  await page.waitForSelector('main p:text-is("No unused sign-in links.")');
  assert.equal((await signIn(reserve)).status, 401);

  // Another link in reserve; then the person signs the app's sign-in out from here.
  const again = await newLink(app, APP);
  await page.click('nav a[href="#/workspace"]');
  await page.click('nav a[href="#/tokens"]');
  await page.waitForSelector('#links tbody tr');
  await page.click(`${appRow} button:text-is("Sign out")`);
  await page.waitForSelector('#notice:text("Device signed out")');
  await page.waitForSelector(appRow, { state: 'detached' });
  await page.waitForSelector('main p:text-is("No unused sign-in links.")');
  assert.equal(await meStatus(app), 401, 'the app’s sign-in');
  assert.equal(await meStatus(fromApp), 401, 'the sign-in made from its link');
  assert.equal((await signIn(again)).status, 401, 'the link it kept');
  assert.equal(await meStatus(other), 200, 'the device that made its link goes on');
  await context.close();
});
