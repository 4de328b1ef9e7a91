// Package faulttest feeds every exported entry point bad input and runs the
// runtime, dispatcher and recovery over a store that fails its Nth call. It
// has no API: the work is in its tests.
package faulttest
