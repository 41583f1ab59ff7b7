package wal

// TEMPORARY stub until the fence/seal work lands; deleted at merge.

import "errors"

var ErrFenced = errors.New("wal: fenced")

type SealInfo struct{ End Pos }

func Seal(fs FS, dir, by string) (SealInfo, error)           { return SealInfo{}, nil }
func ReadSeal(fs FS, dir string) (SealInfo, bool, error)     { return SealInfo{}, false, nil }
