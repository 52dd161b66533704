module ignored

// This directory holds npm packages, not Go: the go.mod keeps ./... out of node_modules.
