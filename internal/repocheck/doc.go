// Package repocheck holds no code, only tests of the repository's own files: that the
// Makefile's fuzz target runs every fuzz test, and that the links between the Markdown
// documents resolve. They read files and walk the tree, offline, in well under a second.
package repocheck
