package main

// The binary carries the IANA time zone database, so that a limit's
// time_zone loads in a container image that has none (a distroless or
// scratch image): about 450 kB.
import _ "time/tzdata"
