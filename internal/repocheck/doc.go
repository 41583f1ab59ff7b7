// Package repocheck holds no code, only tests of the repository's own files: that the
// Makefile's fuzz target runs every fuzz test, that the links between the Markdown
// documents resolve, and that every time.Sleep in a test says why it sleeps. They read
// files and walk the tree, offline, in well under a second.
package repocheck
