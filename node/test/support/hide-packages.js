'use strict'
// `node --require test/support/hide-packages.js`: Node's module resolution fails for the packages
// named in HIDE_PACKAGES (comma-separated), as when they are not installed.
const Module = require('node:module')

const hidden = (process.env.HIDE_PACKAGES || '').split(',').filter(Boolean)
const resolve = Module._resolveFilename
Module._resolveFilename = function (request, ...rest) {
  if (hidden.some((name) => request === name || request.startsWith(`${name}/`))) {
    const error = new Error(`Cannot find module '${request}'`)
    error.code = 'MODULE_NOT_FOUND'
    throw error
  }
  return resolve.call(this, request, ...rest)
}
