// A host app's use of the browser module, type-checked against the shipped declarations: a
// registered tool with a handler, grants, a session, status events.
import { AuthError, Sealpost, type SealpostEvent, type SignedIn, type StopReason, type ToolSpec } from 'sealpost';

const lookupOrder: ToolSpec = {
  name: 'lookup_order',
  description: 'Finds an order by its number in this shop\'s tab.',
  inputSchema: { type: 'object', properties: { number: { type: 'string' } }, required: ['number'] },
  kind: 'read',
};

export async function startServing(ownerToken: string): Promise<StopReason | 'already_serving' | 'served_elsewhere'> {
  const tab = await Sealpost.open({ ownerToken, workspace: 'shop' });
  for (const problem of tab.restored.problems) console.warn(problem);
  await tab.registerTool(lookupOrder, async (args) => {
    const number = String(args.number);
    return { text: `Order ${number} shipped.`, structured: { number, shipped: true } };
  });
  await tab.setGrants({ access: 'on', sources: [], tools: ['lookup_order'] });
  const started = await tab.startSession(3600);
  console.log(`pair with ${started.pairingCode} (fingerprint ${started.fingerprint})`);
  // A listener gets its own event's type: `reason` is a StopReason, no narrowing needed.
  tab.on('stopped', ({ reason }) => console.log(`stopped: ${reason}`));
  tab.on('*', (event: SealpostEvent) => console.log(event.type));
  tab.endOnPagehide();
  return await tab.serve();
}

// Signing in from a link, then renewing: the token is a string, the deadline a number.
export async function signInFromLink(): Promise<SignedIn | null> {
  const link = Sealpost.readSignInLink(location.hash);
  if (!link) return null;
  try {
    const signed = await Sealpost.signIn(link.code, link.relayOrigin);
    const renewed = await Sealpost.renew(signed.token, link.relayOrigin);
    const lasts: number = renewed.expiresAt - Date.now();
    console.log(`signed in as ${renewed.owner.name} for ${lasts} ms`);
    return renewed;
  } catch (error) {
    if (error instanceof AuthError && error.code === 'invalid_signin_code') return null;
    throw error;
  }
}

// The declarations are not `any`: a tool kind that does not exist is a type error.
const wrong: ToolSpec = {
  name: 'x', description: 'x', inputSchema: {},
  // @ts-expect-error 'write' is not a ToolKind
  kind: 'write',
};
void wrong;
