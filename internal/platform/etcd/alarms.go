package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/storage"
)

// An etcd member raises the NOSPACE alarm when its database would grow
// past its quota (QuotaBackendBytes); while any member's is raised, the
// whole cluster refuses writes (deletes included, as they write too) and
// takes only reads and compactions. etcd never clears the alarm itself:
// its runbook is compact, defragment, disarm. ReclaimSpace is that
// runbook, run by the member's server once compaction has made room.

// reclaimBelow is the share of the quota the data in use must fall
// under before a NOSPACE alarm is cleared: clearing it with the database
// still at its quota would raise it again with the next write.
const reclaimBelow = 0.9

// Alarm is an active alarm of the cluster.
type Alarm struct {
	// Type is etcd's name for it: NOSPACE, CORRUPT.
	Type string
	// MemberID is the member that raised it; Mine whether that is this
	// member.
	MemberID uint64
	Mine     bool
}

func (a Alarm) String() string {
	if a.Mine {
		return a.Type + " (this member)"
	}
	return fmt.Sprintf("%s (member %x)", a.Type, a.MemberID)
}

// Alarms is the cluster's active alarms, as this member's store holds
// them: no request leaves the process.
func (s *Server) Alarms() []Alarm {
	var out []Alarm
	for _, a := range s.etcd.Server.Alarms() {
		out = append(out, Alarm{Type: a.Alarm.String(), MemberID: a.MemberID, Mine: a.MemberID == s.ID()})
	}
	slices.SortFunc(out, func(a, b Alarm) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// CheckAlarms is /readyz's check of the alarms: an error naming each
// active one and what to do about it.
func (s *Server) CheckAlarms() error {
	alarms := s.Alarms()
	if len(alarms) == 0 {
		return nil
	}
	var names []string
	nospace := false
	for _, a := range alarms {
		names = append(names, a.String())
		nospace = nospace || a.Type == pb.AlarmType_NOSPACE.String()
	}
	msg := "etcd alarms: " + strings.Join(names, ", ")
	if nospace {
		msg += fmt.Sprintf("; the cluster refuses writes: its database reached the quota of %d bytes. "+
			"Delete objects: the server then compacts, defragments and clears the alarm", s.Quota())
	}
	return errors.New(msg)
}

// Quota is the member's database size limit in bytes.
func (s *Server) Quota() int64 {
	if q := s.etcd.Server.Cfg.QuotaBackendBytes; q > 0 {
		return q
	}
	return storage.DefaultQuotaBytes
}

// Space is the member's database size on disk and the part of it in use:
// what compaction frees is unused until a defragmentation returns it.
func (s *Server) Space() (size, inUse int64) {
	be := s.etcd.Server.Backend()
	return be.Size(), be.SizeInUse()
}

// ReclaimSpace clears this member's NOSPACE alarm once there is room. It
// compacts the history up to the current revision, as the apiserver's
// compactor cannot while the alarm is raised (it records its progress
// with a write): what deleted objects held becomes free. Once the data in
// use is under reclaimBelow of the quota, it defragments the member,
// returning the free pages (etcd checks the quota against the database's
// size, free pages included), and disarms the alarm. It reports whether
// it did; with no alarm of this member, or no room yet, it changes
// nothing but the compaction.
func (s *Server) ReclaimSpace(ctx context.Context) (bool, error) {
	var mine *pb.AlarmMember
	for _, a := range s.etcd.Server.Alarms() {
		if a.Alarm == pb.AlarmType_NOSPACE && a.MemberID == s.ID() {
			mine = a
		}
	}
	if mine == nil {
		return false, nil
	}
	if kv := s.etcd.Server.KV(); kv.Rev() > kv.FirstRev() {
		// Watchers behind the current revision relist, as after any
		// compaction.
		_, err := s.client.Compact(ctx, kv.Rev(), clientv3.WithCompactPhysical())
		if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			return false, fmt.Errorf("compacting: %w", err)
		}
	}
	if _, inUse := s.Space(); float64(inUse) >= reclaimBelow*float64(s.Quota()) {
		return false, nil
	}
	if err := s.etcd.Server.Defragment(); err != nil {
		return false, fmt.Errorf("defragmenting: %w", err)
	}
	if size, _ := s.Space(); float64(size) >= reclaimBelow*float64(s.Quota()) {
		return false, nil
	}
	if _, err := s.client.AlarmDisarm(ctx, (*clientv3.AlarmMember)(mine)); err != nil {
		return false, fmt.Errorf("disarming the NOSPACE alarm: %w", err)
	}
	return true, nil
}
