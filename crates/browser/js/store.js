// The workspace in IndexedDB, one database per workspace. The pairing, pending proposals and
// the audit log are sealed with AES-256-GCM, with the record's name as associated data (a record
// cannot be moved to another name). The sealing key is either
//   - the device key: made once by WebCrypto, non-extractable (the page can use it, never read
//     it), kept in IndexedDB as a CryptoKey object; documents are then stored as they are; or
//   - the passphrase key: PBKDF2-HMAC-SHA-256 over the passphrase with a random 16-byte salt of
//     this workspace, 600,000 iterations, to an AES-256-GCM key that is never stored. Documents
//     are then sealed too, keyed by a salted digest of their id, so titles, bodies and paths are
//     unreadable without the passphrase.
//
// A record that does not open or parse is reported and skipped: nothing else is lost, and an
// unreadable setting reads as nothing configured.
//
// The search index snapshot (bytes the module makes) is one more sealed record, 'index': under
// a passphrase it holds every document's terms, so it is sealed like the documents. It is a
// cache: setting or removing the passphrase drops it (the worker writes a fresh one), and one
// that does not open is reported and the module indexes the documents instead.

const VERSION = 1;
const PBKDF2_ITERATIONS = 600_000;
const PASSPHRASE_CHECK = 'sealpost passphrase check';
const INDEX_RECORD = 'index';

// An error the page can tell apart by its code (`passphrase_required`, `wrong_passphrase`).
export class StoreError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

function hex(bytes) {
  return [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

async function passphraseKey(passphrase, salt, iterations) {
  const material = await crypto.subtle.importKey('raw', new TextEncoder().encode(passphrase), 'PBKDF2', false, ['deriveKey']);
  return await crypto.subtle.deriveKey(
    { name: 'PBKDF2', hash: 'SHA-256', salt, iterations },
    material, { name: 'AES-GCM', length: 256 }, false, ['encrypt', 'decrypt']);
}

function request(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

function done(tx) {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error ?? new Error('transaction aborted'));
  });
}

export class Store {
  constructor(db) {
    this.db = db;
    this.key = null;
    // Set when a passphrase protects the workspace: {kdf, iterations, salt, check}.
    this.protection = null;
  }

  // Opens the workspace; one protected by a passphrase opens only with it.
  static async open(workspace, passphrase) {
    const open = indexedDB.open(`sealpost-${workspace}`, VERSION);
    open.onupgradeneeded = () => {
      const db = open.result;
      db.createObjectStore('documents', { keyPath: 'id' });
      db.createObjectStore('sources');
      db.createObjectStore('plain');
      db.createObjectStore('sealed');
      db.createObjectStore('audit', { autoIncrement: true });
      db.createObjectStore('keys');
    };
    const store = new Store(await request(open));
    store.protection = (await store.getPlain('passphrase')) ?? null;
    if (store.protection) await store.unlock(passphrase);
    return store;
  }

  get protectedByPassphrase() {
    return this.protection !== null;
  }

  async unlock(passphrase) {
    if (!this.protection) return;
    if (!passphrase) throw new StoreError('passphrase_required', 'This workspace is protected by a passphrase: enter it to open the workspace.');
    const { salt, iterations, check } = this.protection;
    const key = await passphraseKey(passphrase, salt, iterations);
    try {
      const plain = await crypto.subtle.decrypt({ name: 'AES-GCM', iv: check.iv, additionalData: new TextEncoder().encode('passphrase') }, key, check.sealed);
      if (new TextDecoder().decode(plain) !== PASSPHRASE_CHECK) throw new Error('check');
    } catch {
      throw new StoreError('wrong_passphrase', 'That passphrase does not open this workspace. Check it and try again.');
    }
    this.key = key;
  }

  // The sealing key. The device key is made once and kept; a passphrase key exists only in
  // memory after `unlock`.
  async sealingKey() {
    if (this.key) return this.key;
    if (this.protection) throw new StoreError('passphrase_required', 'The workspace is locked: enter its passphrase to open it.');
    const tx = this.db.transaction('keys', 'readwrite');
    let key = await request(tx.objectStore('keys').get('sealing'));
    if (!(key instanceof CryptoKey)) {
      key = await crypto.subtle.generateKey({ name: 'AES-GCM', length: 256 }, false, ['encrypt', 'decrypt']);
      const write = this.db.transaction('keys', 'readwrite');
      write.objectStore('keys').put(key, 'sealing');
      await done(write);
    }
    this.key = key;
    return key;
  }

  // Locking drops the key from memory; the next sealed read loads it again.
  forgetKey() {
    this.key = null;
  }

  // Seals text, or bytes as they are.
  async seal(text, name, key) {
    const iv = crypto.getRandomValues(new Uint8Array(12));
    const data = typeof text === 'string' ? new TextEncoder().encode(text) : text;
    const sealed = await crypto.subtle.encrypt(
      { name: 'AES-GCM', iv, additionalData: new TextEncoder().encode(name) },
      key ?? await this.sealingKey(), data);
    return { v: 1, iv, sealed: new Uint8Array(sealed) };
  }

  // `{value}` when the record opens, `{error}` when it is damaged or foreign, `{}` when absent.
  async open(record, name) {
    const opened = await this.openBytes(record, name);
    return opened.value ? { value: new TextDecoder().decode(opened.value) } : opened;
  }

  // As `open`, the value as bytes.
  async openBytes(record, name) {
    if (record === undefined) return {};
    const key = await this.sealingKey();
    try {
      if (record?.v !== 1) throw new Error('unknown record');
      const plain = await crypto.subtle.decrypt(
        { name: 'AES-GCM', iv: record.iv, additionalData: new TextEncoder().encode(name) },
        key, record.sealed);
      return { value: new Uint8Array(plain) };
    } catch {
      return { error: `the saved ${name} could not be read (damaged, or from another browser profile) and was skipped` };
    }
  }

  // The search index snapshot: `{value}` (bytes), `{error}`, or `{}` when none is kept.
  async getIndexSnapshot() {
    const tx = this.db.transaction('sealed');
    const opened = await this.openBytes(await request(tx.objectStore('sealed').get(INDEX_RECORD)), INDEX_RECORD);
    return opened.error ? { error: 'the saved search index could not be read (damaged, or from another browser profile)' } : opened;
  }

  async putIndexSnapshot(bytes) {
    await this.putSealed(INDEX_RECORD, bytes);
  }

  async putSealed(name, text) {
    const record = await this.seal(text, name);
    const tx = this.db.transaction('sealed', 'readwrite');
    tx.objectStore('sealed').put(record, name);
    await done(tx);
  }

  async getSealed(name) {
    const tx = this.db.transaction('sealed');
    return await this.open(await request(tx.objectStore('sealed').get(name)), name);
  }

  async deleteSealed(name) {
    const tx = this.db.transaction('sealed', 'readwrite');
    tx.objectStore('sealed').delete(name);
    await done(tx);
  }

  async putPlain(name, value) {
    const tx = this.db.transaction('plain', 'readwrite');
    tx.objectStore('plain').put(value, name);
    await done(tx);
  }

  async getPlain(name) {
    const tx = this.db.transaction('plain');
    return await request(tx.objectStore('plain').get(name));
  }

  async putSource(name) {
    const tx = this.db.transaction('sources', 'readwrite');
    tx.objectStore('sources').put(true, name);
    await done(tx);
  }

  async sources() {
    const tx = this.db.transaction('sources');
    return (await request(tx.objectStore('sources').getAllKeys())).filter((k) => typeof k === 'string');
  }

  // Where a document is kept: its id, or under a passphrase a salted digest of it.
  async documentKey(id, protection = this.protection) {
    if (!protection) return id;
    const data = new Uint8Array([...protection.salt, ...new TextEncoder().encode(id)]);
    return `h_${hex(await crypto.subtle.digest('SHA-256', data))}`;
  }

  async documentRecord(doc, protection = this.protection, key = undefined) {
    if (!protection) return doc;
    return { id: await this.documentKey(doc.id, protection), ...await this.seal(JSON.stringify(doc), 'document', key) };
  }

  // Many documents in one transaction: an import of a thousand files is one commit.
  async putDocuments(documents) {
    const records = await Promise.all(documents.map((doc) => this.documentRecord(doc)));
    const tx = this.db.transaction(['documents', 'sources'], 'readwrite');
    for (const record of records) tx.objectStore('documents').put(record);
    for (const doc of documents) tx.objectStore('sources').put(true, doc.source);
    await done(tx);
  }

  async deleteDocument(id) {
    const key = await this.documentKey(id);
    const tx = this.db.transaction('documents', 'readwrite');
    tx.objectStore('documents').delete(key);
    await done(tx);
  }

  // Every document, each `{value}` or `{error}` (a record that is not a document).
  async documents() {
    const tx = this.db.transaction('documents');
    const all = await request(tx.objectStore('documents').getAll());
    const damaged = { error: 'a stored document was damaged and was skipped' };
    return await Promise.all(all.map(async (record) => {
      let doc = record;
      if (this.protection) {
        const opened = await this.open(record, 'document');
        if (!opened.value) return damaged;
        try { doc = JSON.parse(opened.value); } catch { return damaged; }
      }
      const ok = doc && typeof doc.id === 'string' && typeof doc.source === 'string'
        && typeof doc.title === 'string' && typeof doc.body === 'string';
      return ok
        ? { value: { id: doc.id, source: doc.source, title: doc.title, body: doc.body, updated_at_ms: Number(doc.updated_at_ms) || 0 } }
        : damaged;
    }));
  }

  // Protects the workspace with `passphrase` (or, with null, goes back to the device key):
  // every sealed record and document is read under the current key and written under the new
  // one in a single transaction, so a failure leaves the workspace as it was. Records that no
  // longer opened under the old key are dropped: nothing could ever read them again.
  async setPassphrase(passphrase) {
    const documents = [];
    for (const { value, error } of await this.documents()) if (value) documents.push(value); else if (error) throw new StoreError('damaged', 'A stored document could not be read; nothing was changed.');
    const read = this.db.transaction(['sealed', 'audit']);
    const sealedKeys = await request(read.objectStore('sealed').getAllKeys());
    const sealedRecords = await request(read.objectStore('sealed').getAll());
    const auditKeys = await request(read.objectStore('audit').getAllKeys());
    const auditRecords = await request(read.objectStore('audit').getAll());
    // The index snapshot is not carried over (it is bytes, and a cache): it is deleted below
    // with the records that did not open, and the worker writes a fresh one.
    const opened = async (records, names) => Promise.all(records.map((record, i) => (names(i) === INDEX_RECORD ? {} : this.open(record, names(i)))));
    const sealed = await opened(sealedRecords, (i) => sealedKeys[i]);
    const audit = await opened(auditRecords, () => 'audit');

    let protection = null;
    let key;
    if (passphrase) {
      if (passphrase.length < 8) throw new StoreError('weak_passphrase', 'Choose a passphrase of at least 8 characters.');
      const salt = crypto.getRandomValues(new Uint8Array(16));
      key = await passphraseKey(passphrase, salt, PBKDF2_ITERATIONS);
      protection = { kdf: 'PBKDF2-HMAC-SHA-256', iterations: PBKDF2_ITERATIONS, salt, check: await this.seal(PASSPHRASE_CHECK, 'passphrase', key) };
    } else {
      this.protection = null;
      this.key = null;
      key = await this.sealingKey();
    }
    const docRecords = await Promise.all(documents.map((doc) => this.documentRecord(doc, protection, key)));
    const resealedWith = await Promise.all(sealed.map((r, i) => (r.value === undefined ? null : this.seal(r.value, sealedKeys[i], key))));
    const auditSealed = await Promise.all(audit.map((r) => (r.value === undefined ? null : this.seal(r.value, 'audit', key))));

    const tx = this.db.transaction(['documents', 'sealed', 'audit', 'plain'], 'readwrite');
    tx.objectStore('documents').clear();
    for (const record of docRecords) tx.objectStore('documents').put(record);
    sealedKeys.forEach((name, i) => { if (resealedWith[i]) tx.objectStore('sealed').put(resealedWith[i], name); else tx.objectStore('sealed').delete(name); });
    auditKeys.forEach((k, i) => { if (auditSealed[i]) tx.objectStore('audit').put(auditSealed[i], k); else tx.objectStore('audit').delete(k); });
    if (protection) tx.objectStore('plain').put(protection, 'passphrase'); else tx.objectStore('plain').delete('passphrase');
    await done(tx);
    this.protection = protection;
    this.key = key;
  }

  async appendAudit(record) {
    const sealed = await this.seal(JSON.stringify(record), 'audit');
    const tx = this.db.transaction('audit', 'readwrite');
    tx.objectStore('audit').add(sealed);
    await done(tx);
  }

  // The audit log, newest first; entries that do not open are counted, not shown.
  async auditLog() {
    await this.sealingKey(); // a locked workspace says so, even with an empty log
    const tx = this.db.transaction('audit');
    const records = await request(tx.objectStore('audit').getAll());
    const entries = [];
    let unreadable = 0;
    for (const record of records.reverse()) {
      const opened = await this.open(record, 'audit');
      if (opened.value) entries.push(JSON.parse(opened.value)); else unreadable += 1;
    }
    return { entries, unreadable };
  }
}
