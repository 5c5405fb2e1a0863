// The workspace in IndexedDB, one database per workspace. Documents, sources and settings are
// stored as they are; the pairing, pending proposals and the audit log are sealed with
// AES-256-GCM under a key WebCrypto made non-extractable (the page can use it, never read it).
//
// A record that does not open or parse is reported and skipped: nothing else is lost, and an
// unreadable setting reads as nothing configured.

const VERSION = 1;

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
  }

  static async open(workspace) {
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
    return new Store(await request(open));
  }

  // The sealing key: made once, non-extractable, kept in IndexedDB as a CryptoKey object.
  async sealingKey() {
    if (this.key) return this.key;
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

  async seal(text, name) {
    const iv = crypto.getRandomValues(new Uint8Array(12));
    const data = new TextEncoder().encode(text);
    const sealed = await crypto.subtle.encrypt(
      { name: 'AES-GCM', iv, additionalData: new TextEncoder().encode(name) },
      await this.sealingKey(), data);
    return { v: 1, iv, sealed: new Uint8Array(sealed) };
  }

  // `{value}` when the record opens, `{error}` when it is damaged or foreign, `{}` when absent.
  async open(record, name) {
    if (record === undefined) return {};
    try {
      if (record?.v !== 1) throw new Error('unknown record');
      const plain = await crypto.subtle.decrypt(
        { name: 'AES-GCM', iv: record.iv, additionalData: new TextEncoder().encode(name) },
        await this.sealingKey(), record.sealed);
      return { value: new TextDecoder().decode(plain) };
    } catch {
      return { error: `the saved ${name} could not be read (damaged, or from another browser profile) and was skipped` };
    }
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

  // Many documents in one transaction: an import of a thousand files is one commit.
  async putDocuments(documents) {
    const tx = this.db.transaction(['documents', 'sources'], 'readwrite');
    for (const doc of documents) {
      tx.objectStore('documents').put(doc);
      tx.objectStore('sources').put(true, doc.source);
    }
    await done(tx);
  }

  async deleteDocument(id) {
    const tx = this.db.transaction('documents', 'readwrite');
    tx.objectStore('documents').delete(id);
    await done(tx);
  }

  // Every document, each `{value}` or `{error}` (a record that is not a document).
  async documents() {
    const tx = this.db.transaction('documents');
    const all = await request(tx.objectStore('documents').getAll());
    return all.map((doc) => {
      const ok = doc && typeof doc.id === 'string' && typeof doc.source === 'string'
        && typeof doc.title === 'string' && typeof doc.body === 'string';
      return ok
        ? { value: { id: doc.id, source: doc.source, title: doc.title, body: doc.body, updated_at_ms: Number(doc.updated_at_ms) || 0 } }
        : { error: 'a stored document was damaged and was skipped' };
    });
  }

  async appendAudit(record) {
    const sealed = await this.seal(JSON.stringify(record), 'audit');
    const tx = this.db.transaction('audit', 'readwrite');
    tx.objectStore('audit').add(sealed);
    await done(tx);
  }

  // The audit log, newest first; entries that do not open are counted, not shown.
  async auditLog() {
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
