// Team sign-in as a person meets it: the relay set up for the team's identity provider (a real
// OpenID provider, oidc-provider), "Sign in with your team's account", the provider's own
// login page, back in the app, a session served to the real plugin; then the person is
// removed at the provider, and within the re-check period the tab stops serving and says why.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  startRelay, startProvider, freeAddress, launchBrowser, openPage, tempDir, pairPlugin, McpClient, screenshotPath,
} from './harness.mjs';

// 0.001 hours: 3.6 s, so removal shows within seconds.
const RECHECK_HOURS = '0.001';

let provider;
let relay;
let browser;

before(async () => {
  const listen = await freeAddress();
  provider = await startProvider([`http://${listen}/auth/oidc/callback`]);
  relay = await startRelay({
    listen,
    args: [
      '--oidc-issuer', provider.issuer,
      '--oidc-client-id', 'sealpost-relay',
      '--oidc-client-secret-file', provider.secretFile,
      '--oidc-allowed-domains', 'team.example',
      '--oidc-recheck-hours', RECHECK_HOURS,
    ],
  });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await relay?.stop();
  provider?.stop();
});

async function signInAtProvider(page, user) {
  await page.click('#team-signin-button');
  // The provider's own login page.
  await page.waitForSelector('input[name="login"]');
  await page.fill('input[name="login"]', user);
  await page.fill('input[name="password"]', 'any password');
  await page.click('button[type="submit"]');
}

test('a person signs in with the team account, serves the plugin, and is stopped once removed at the provider', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await openPage(context, relay.base);
  try {
    await page.waitForSelector('#team-signin-button');
    await page.screenshot({ path: screenshotPath('signin-team-1280x800'), fullPage: true });
    await signInAtProvider(page, 'alice');
    await page.waitForSelector('#nav:not([hidden])');
    assert.ok(!page.url().includes('signin='), 'the code leaves the address bar at once');
    assert.equal(await page.evaluate(() => sessionStorage.getItem('sealpost.team-signin.verifier')), null, 'the verifier is used up');

    // AI access on, every tool, a session; the real plugin pairs and calls.
    await page.click('nav a[href="#/access"]');
    await page.waitForSelector('main h2:text-is("AI access")');
    await page.check('#access-on');
    for (const box of await page.$$('input[name="grant-tool"]')) await box.check();
    await page.click('#save-grants');
    await page.click('#start-session');
    await page.waitForSelector('#status-pill:text-is("Serving")');
    const code = (await page.textContent('#pairing-code')).trim();
    const config = tempDir('sealpost-web-plugin-');
    const paired = await pairPlugin(config, code);
    assert.equal(paired.status, 0, paired.output);
    const mcp = new McpClient(config);
    await mcp.initialize();
    const listed = await mcp.call('list_sources');
    assert.equal(listed.isError, false, listed.text);

    // Removed at the provider: the next renewal is refused, every token of hers revoked; the
    // tab stops serving and says why.
    await provider.remove('alice');
    await page.waitForSelector('main h2:text-is("Sign in")', { timeout: 20_000 });
    const notice = await page.textContent('#notice');
    assert.match(notice, /identity provider/, notice);
    await page.screenshot({ path: screenshotPath('signin-team-removed-1280x800'), fullPage: true });
    const refused = await mcp.call('list_sources');
    assert.equal(refused.isError, true, refused.text);
    mcp.close();
  } catch (error) {
    console.error('page when it failed:', await page.locator('body').innerText().catch(() => '?'));
    throw error;
  } finally {
    await context.close();
  }
});

test('a person whose email the provider has not verified is refused on a page that says why', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await openPage(context, relay.base);
  try {
    await page.waitForSelector('#team-signin-button');
    await signInAtProvider(page, 'mallory');
    await page.waitForSelector('#signin-error');
    assert.equal(await page.textContent('#signin-error'), 'domain_not_allowed');
    assert.match(await page.textContent('h2'), /may not use this relay/);
    assert.match(await page.textContent('main'), /has not verified the email address mallory@team\.example/);
    await page.screenshot({ path: screenshotPath('signin-team-refused-1280x800'), fullPage: true });
    // Back to sign-in leads to the app.
    await page.click('a:text-is("Back to sign-in")');
    await page.waitForSelector('#team-signin-button');
  } finally {
    await context.close();
  }
});
